// Package edit is the logic of VERA's file tool, edit (after OpenHands'
// str_replace_editor): view a file with line numbers, create a file,
// replace the one occurrence of a string, insert lines, and undo an edit.
//
// The package does no I/O. sandboxd reads the file from the sandbox,
// checks the request with CheckPath and Validate, calls Apply (or Undo,
// with the content it kept from before the file's last edit), writes
// Outcome.Content back when Outcome.Changed (or removes the file when
// Outcome.Remove), shows Outcome.Text to the agent and publishes
// Outcome.Result. A request the tool does not perform comes back as a
// *Refusal, whose message tells the agent (a model) what to do instead.
//
// Edits keep the file's bytes outside the edited region exactly: CRLF line
// endings, a missing final newline, any other byte. In a file whose lines
// all end in CRLF, old_str and new_str written with "\n" are matched and
// written with "\r\n", and view shows the lines without their "\r".
package edit
