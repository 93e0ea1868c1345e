package llm

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// AllowKeyEnvFlag is the command-line flag that adds a variable to the
// allow-list of a VERA command (named in the refusal).
const AllowKeyEnvFlag = "--allow-api-key-env"

// ErrKeyEnvNotAllowed: a model configuration names an api_key_env that the
// process's operator did not allow (Config.KeyEnvs). errors.Is on a
// *KeyEnvError finds it.
var ErrKeyEnvNotAllowed = errors.New("api_key_env not allowed")

// KeyEnvError is the refusal of an api_key_env that is not on the
// allow-list. Name is a valid variable name (a value that is not one is
// refused earlier, without being repeated), never the variable's value;
// the message shows it in full only when it is upper case (a lower-case
// "name" may be a key pasted in its place).
type KeyEnvError struct {
	Name string // the variable the configuration named
	Who  string // who refuses ("this agent"); "" = "this process"
}

func (e *KeyEnvError) Error() string {
	who := e.Who
	if who == "" {
		who = "this process"
	}
	if shown := showEnvName(e.Name); shown != e.Name {
		// Not upper case: perhaps a key that looks like a name.
		return fmt.Sprintf("api_key_env %s (not shown in full: it may be a key) is not one %s may read; start it with %s NAME", shown, who, AllowKeyEnvFlag)
	}
	return fmt.Sprintf("api_key_env %s is not one %s may read; start it with %s %s", e.Name, who, AllowKeyEnvFlag, e.Name)
}

// Unwrap makes errors.Is(err, ErrKeyEnvNotAllowed) hold.
func (e *KeyEnvError) Unwrap() error { return ErrKeyEnvNotAllowed }

// KeyEnvs is an allow-list of the environment variables model clients may
// read as API keys: the ones a component's operator named
// (--allow-api-key-env, and the command's own api-key-env flags). Model
// settings arrive in events that whoever may submit a task writes; without
// a list, such a person could have any variable of the component's
// environment sent as a Bearer token to a server of their choosing.
//
// A nil *KeyEnvs allows every variable: it is for callers whose model
// settings are their operator's own (vera model check), never for
// settings that came in an event.
type KeyEnvs struct {
	names []string // sorted, unique
	who   string
}

// AllowKeyEnvs returns the allow-list of names (empty names are skipped;
// no name at all allows none).
func AllowKeyEnvs(names ...string) *KeyEnvs {
	k := &KeyEnvs{}
	for _, n := range names {
		if n = strings.TrimSpace(n); n != "" {
			k.names = append(k.names, n)
		}
	}
	slices.Sort(k.names)
	k.names = slices.Compact(k.names)
	return k
}

// DefaultKeyEnv is allowed when the operator named no variable of their own
// (see DefaultKeyEnvs).
const DefaultKeyEnv = "OPENAI_API_KEY"

// DefaultKeyEnvs is the allow-list of a process whose operator named none:
// OPENAI_API_KEY and the variable VERA_API_KEY_ENV names (lookup reads
// the environment; nil means os.LookupEnv).
func DefaultKeyEnvs(lookup func(string) (string, bool)) *KeyEnvs {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	v, _ := lookup("VERA_API_KEY_ENV")
	return AllowKeyEnvs(DefaultKeyEnv, v)
}

// For returns the same list naming who refuses ("this agent", "vera
// eval") in its errors.
func (k *KeyEnvs) For(who string) *KeyEnvs {
	if k == nil {
		return nil
	}
	return &KeyEnvs{names: k.names, who: who}
}

// Allows reports whether name may be read. A nil list allows every name.
func (k *KeyEnvs) Allows(name string) bool {
	return k == nil || slices.Contains(k.names, name)
}

// Names returns the allowed names, sorted (nil for a nil list).
func (k *KeyEnvs) Names() []string {
	if k == nil {
		return nil
	}
	return slices.Clone(k.names)
}

// String lists the allowed names ("any" for a nil list, "none" for an
// empty one).
func (k *KeyEnvs) String() string {
	switch {
	case k == nil:
		return "any"
	case len(k.names) == 0:
		return "none"
	}
	return strings.Join(k.names, ", ")
}

// Check returns nil when name is empty (no key) or allowed; else a
// *KeyEnvError naming the flag that allows it. A name that is not a
// variable name at all (a pasted key) is refused without being repeated.
// It never reads the environment.
func (k *KeyEnvs) Check(name string) error {
	if name == "" || k == nil {
		return nil
	}
	if !envNameRE.MatchString(name) {
		return fmt.Errorf("llm: api_key_env %q is not an environment variable name (it must name the variable holding the key, not be the key)", abbreviateSecret(name))
	}
	if slices.Contains(k.names, name) {
		return nil
	}
	return &KeyEnvError{Name: name, Who: k.who}
}
