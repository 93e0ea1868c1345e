// Package archtest holds the tests that enforce VERA's dependency rules
// (BRIEF invariant 1): components meet only on the bus and never import
// one another, the bus imports no component, and test helpers never reach
// production code. It has no non-test code.
package archtest
