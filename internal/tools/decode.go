package tools

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DecodeError is a bad tool call. Its message is written for the API client
// or the model that made the call (the HTTP API answers 400 with it), and
// names the parameter at fault: "params.timeout: want number, got string".
type DecodeError struct {
	Param string // the parameter at fault; "" when the call as a whole is
	Msg   string // the whole message
}

func (e *DecodeError) Error() string { return e.Msg }

func paramErr(param, format string, args ...any) *DecodeError {
	return &DecodeError{Param: param, Msg: "params." + param + ": " + fmt.Sprintf(format, args...)}
}

type kind int

const (
	kString  kind = iota
	kLine         // integer ≥ 1 (offset, limit)
	kSeconds      // positive number of seconds
)

type param struct {
	name     string
	kind     kind
	required bool
}

// toolParams lists each tool's parameters, in the order they are checked
// and listed in messages. Definitions' schemas say the same (a test checks).
var toolParams = map[string][]param{
	ToolRead:  {{"path", kString, true}, {"offset", kLine, false}, {"limit", kLine, false}},
	ToolWrite: {{"path", kString, true}, {"content", kString, true}},
	ToolPatch: {{"path", kString, true}, {"oldText", kString, true}, {"newText", kString, true}},
	ToolExec:  {{"command", kString, true}, {"timeout", kSeconds, false}},
}

const knownTools = "exec, patch, read, write"

// Decode checks the parameters of a core tool call and returns the call.
// It is strict: unknown tools and parameters, missing required parameters,
// wrong JSON types and out-of-range numbers are errors. A null optional
// parameter counts as absent; absent or null params count as {}. Relative
// paths are resolved against /workspace. Every error is a *DecodeError.
func Decode(tool string, params json.RawMessage) (Call, error) {
	specs, ok := toolParams[tool]
	if !ok {
		if tool == "" {
			return nil, &DecodeError{Msg: "missing tool name (known: " + knownTools + ")"}
		}
		return nil, &DecodeError{Msg: fmt.Sprintf("unknown tool %q (known: %s)", tool, knownTools)}
	}
	obj, err := decodeObject(params)
	if err != nil {
		return nil, err
	}
	if err := checkUnknown(tool, specs, obj); err != nil {
		return nil, err
	}

	strs := map[string]string{}
	nums := map[string]float64{}
	for _, p := range specs {
		raw, present := obj[p.name]
		if present && string(raw) == "null" && !p.required {
			present = false
		}
		if !present {
			if p.required {
				return nil, paramErr(p.name, "required")
			}
			continue
		}
		switch p.kind {
		case kString:
			if t := jsonType(raw); t != "string" {
				return nil, paramErr(p.name, "want string, got %s", t)
			}
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return nil, paramErr(p.name, "invalid string: %v", err)
			}
			strs[p.name] = s
		case kLine, kSeconds:
			if t := jsonType(raw); t != "number" {
				return nil, paramErr(p.name, "want number, got %s", t)
			}
			f, err := strconv.ParseFloat(string(raw), 64)
			if err != nil || math.IsInf(f, 0) {
				return nil, paramErr(p.name, "number %s is out of range", raw)
			}
			if err := checkNumber(p, f); err != nil {
				return nil, err
			}
			nums[p.name] = f
		}
	}

	var c Call
	switch tool {
	case ToolRead:
		c = &ReadCall{Path: strs["path"], Offset: int(nums["offset"]), Limit: int(nums["limit"])}
	case ToolWrite:
		c = &WriteCall{Path: strs["path"], Content: strs["content"]}
	case ToolPatch:
		c = &PatchCall{Path: strs["path"], OldText: strs["oldText"], NewText: strs["newText"]}
	case ToolExec:
		c = &ExecCall{Command: strs["command"], Timeout: time.Duration(nums["timeout"] * float64(time.Second))}
	}
	if err := c.check(); err != nil {
		return nil, err
	}
	return c, nil
}

func decodeObject(params json.RawMessage) (map[string]json.RawMessage, error) {
	params = bytes.TrimSpace(params)
	if len(params) == 0 || string(params) == "null" {
		return map[string]json.RawMessage{}, nil
	}
	if !json.Valid(params) {
		var v any
		err := json.Unmarshal(params, &v) // for its message
		return nil, &DecodeError{Msg: fmt.Sprintf("params: invalid JSON: %v", err)}
	}
	if params[0] != '{' {
		return nil, &DecodeError{Msg: "params: want object, got " + jsonType(params)}
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(params, &obj); err != nil {
		return nil, &DecodeError{Msg: fmt.Sprintf("params: %v", err)}
	}
	return obj, nil
}

func checkUnknown(tool string, specs []param, obj map[string]json.RawMessage) error {
	var unknown []string
	for k := range obj {
		if !slices.ContainsFunc(specs, func(p param) bool { return p.name == k }) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	names := make([]string, len(specs))
	for i, p := range specs {
		names[i] = p.name
	}
	name := unknown[0]
	if len(name) > 64 {
		name = name[:64] + "…"
	}
	return &DecodeError{
		Param: unknown[0],
		Msg:   fmt.Sprintf("params: unknown parameter %q (%s takes %s)", name, tool, strings.Join(names, ", ")),
	}
}

func checkNumber(p param, f float64) error {
	switch p.kind {
	case kLine:
		if f != math.Trunc(f) {
			return paramErr(p.name, "want integer, got %s", strconv.FormatFloat(f, 'g', -1, 64))
		}
		return checkLine(p.name, f)
	case kSeconds:
		switch {
		case f <= 0:
			return paramErr(p.name, "must be positive (seconds)")
		case f < minTimeoutSecs:
			return paramErr(p.name, "must be at least %g seconds", minTimeoutSecs)
		case f > maxTimeoutSecs:
			return paramErr(p.name, "must be at most %d seconds", maxTimeoutSecs)
		}
	}
	return nil
}

// jsonType names the JSON type of a valid value.
func jsonType(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return "nothing"
	}
	switch raw[0] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "number"
}
