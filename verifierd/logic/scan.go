package logic

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
)

// A MIRAGE inference-result file is about 90 KB, nearly all of it the
// snapshot's input messages (accessibility trees, tool output), while the
// verifier needs the task name, the repetitive_action, the result and a
// few lines of the input. fastParse therefore walks the JSON structure
// without decoding it: strings are skipped with bytes.IndexByte, objects
// and arrays by bracket depth, and only the small fields are decoded; the
// message contents stay as sub-slices of the file's bytes
// (json.RawMessage, no copy), decoded when and where they are read. It
// checks the structure (balanced brackets, terminated strings, keys and
// separators), not the inside of skipped strings; anything it does not
// accept goes to encoding/json, whose errors describe the problem.

var errScan = errors.New("scan")

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// skipString returns the index after the string that starts at data[i]
// ('"').
func skipString(data []byte, i int) (int, error) {
	j := i + 1
	for {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return 0, errScan
		}
		j += k
		// An even number of backslashes before the quote ends the string.
		n := 0
		for b := j - 1; b > i && data[b] == '\\'; b-- {
			n++
		}
		if n%2 == 0 {
			return j + 1, nil
		}
		j++
	}
}

// structural are the bytes skipValue stops at inside objects and arrays.
var structural = [256]bool{'"': true, '{': true, '}': true, '[': true, ']': true}

// skipValue returns the index after the JSON value that starts at data[i].
func skipValue(data []byte, i int) (int, error) {
	if i >= len(data) {
		return 0, errScan
	}
	switch c := data[i]; c {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(data); {
			switch data[j] {
			case '"':
				e, err := skipString(data, j)
				if err != nil {
					return 0, err
				}
				j = e
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1, nil
				}
			}
			j++
			for j < len(data) && !structural[data[j]] {
				j++
			}
		}
		return 0, errScan
	default:
		j := i
		for j < len(data) {
			switch data[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				if j == i {
					return 0, errScan
				}
				return j, nil
			}
			j++
		}
		if j == i {
			return 0, errScan
		}
		return j, nil
	}
}

// scanObject calls field for each member of the object at data[i] with
// the key (unquoted) and the value's bytes, and returns the index after
// the object.
func scanObject(data []byte, i int, field func(key string, val []byte) error) (int, error) {
	i = skipSpace(data, i)
	if i >= len(data) || data[i] != '{' {
		return 0, errScan
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return i + 1, nil
	}
	for {
		if i >= len(data) || data[i] != '"' {
			return 0, errScan
		}
		e, err := skipString(data, i)
		if err != nil {
			return 0, err
		}
		key := data[i+1 : e-1]
		var k string
		if bytes.IndexByte(key, '\\') >= 0 {
			if err := json.Unmarshal(data[i:e], &k); err != nil {
				return 0, errScan
			}
		} else {
			k = string(key)
		}
		i = skipSpace(data, e)
		if i >= len(data) || data[i] != ':' {
			return 0, errScan
		}
		i = skipSpace(data, i+1)
		e, err = skipValue(data, i)
		if err != nil {
			return 0, err
		}
		if err := field(k, data[i:e]); err != nil {
			return 0, err
		}
		i = skipSpace(data, e)
		if i >= len(data) {
			return 0, errScan
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return i + 1, nil
		default:
			return 0, errScan
		}
	}
}

// scanArray calls elem with the bytes of each element of the array at
// data[i].
func scanArray(data []byte, i int, elem func(val []byte) error) (int, error) {
	i = skipSpace(data, i)
	if i >= len(data) || data[i] != '[' {
		return 0, errScan
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return i + 1, nil
	}
	for {
		e, err := skipValue(data, i)
		if err != nil {
			return 0, err
		}
		if err := elem(data[i:e]); err != nil {
			return 0, err
		}
		i = skipSpace(data, e)
		if i >= len(data) {
			return 0, errScan
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case ']':
			return i + 1, nil
		default:
			return 0, errScan
		}
	}
}

// jsonString decodes a small JSON string value; null is "".
func jsonString(val []byte) (string, error) {
	if len(val) == 4 && string(val) == "null" {
		return "", nil
	}
	if len(val) < 2 || val[0] != '"' {
		return "", errScan
	}
	inner := val[1 : len(val)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner), nil
	}
	var s string
	if err := json.Unmarshal(val, &s); err != nil {
		return "", errScan
	}
	return s, nil
}

// rawValue keeps a value as it is, but drops null like encoding/json does
// for the omitempty fields the snapshot leaves out.
func rawValue(val []byte) json.RawMessage { return json.RawMessage(val) }

// fastParse decodes what the verifier needs of an inference-result file.
// ok is false when the file is not in the expected shape; the caller then
// decodes it with encoding/json.
func fastParse(data []byte) (raw fileJSON, ok bool) {
	end, err := scanObject(data, 0, func(key string, val []byte) error {
		switch key {
		case "task_name":
			s, err := jsonString(val)
			raw.TaskName = s
			return err
		case "goal":
			s, err := jsonString(val)
			raw.Goal = s
			return err
		case "input_step":
			if string(val) == "null" {
				return nil
			}
			n, err := strconv.Atoi(string(val))
			raw.InputStep = n
			return err
		case "repetitive_action":
			raw.RepetitiveAction = rawValue(val)
		case "result":
			raw.Result = rawValue(val)
		case "input":
			if string(val) == "null" {
				return nil
			}
			raw.Input = raw.Input[:0]
			_, err := scanArray(val, 0, func(m []byte) error {
				var msg Message
				_, err := scanObject(m, 0, func(key string, val []byte) error {
					var err error
					switch key {
					case "role":
						msg.Role, err = jsonString(val)
					case "content":
						msg.Content = rawValue(val)
					case "tool_calls":
						msg.ToolCalls = rawValue(val)
					case "tool_call_id":
						msg.ToolCallID, err = jsonString(val)
					case "name":
						msg.Name, err = jsonString(val)
					}
					return err
				})
				raw.Input = append(raw.Input, msg)
				return err
			})
			return err
		default:
			if len(key) > 0 && !isLowerASCII(key) {
				return errScan // encoding/json matches keys case-insensitively
			}
		}
		return nil
	})
	if err != nil || skipSpace(data, end) != len(data) {
		return fileJSON{}, false
	}
	return raw, true
}

func isLowerASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' || c >= 0x80 {
			return false
		}
	}
	return true
}
