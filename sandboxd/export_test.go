package sandboxd

// SessionKillScript is sessionKillScript, for the tests of package
// sandboxd_test.
const SessionKillScript = sessionKillScript

// KillScript is killScript, for the tests of package sandboxd_test.
const KillScript = killScript
