package tools

import (
	"encoding/json"
	"fmt"

	"github.com/beige-dev/beige/internal/sandbox"
)

// Definition describes a core tool to the model.
type Definition struct {
	Name        string
	Description string
	Parameters  json.RawMessage // JSON Schema of the params object
}

// Limits the tools apply, shown to the model in the descriptions.
const (
	readDefaultLimit = 2000                       // lines shown when limit is absent
	readMaxBytes     = 50 << 10                   // bytes of text shown by one read
	readFetchBytes   = 8 << 20                    // bytes of a file read can see
	imageMaxBytes    = 5 << 20                    // largest image returned as an image
	patchMaxBytes    = 10 << 20                   // largest file patch edits
	execOutputLimit  = sandbox.DefaultOutputLimit // bytes of exec output kept
	sniffBytes       = 8 << 10                    // bytes looked at to tell text from binary
)

var definitions = []Definition{
	{
		Name: ToolRead,
		Description: fmt.Sprintf("Read a file in the sandbox. Relative paths are relative to /workspace. "+
			"Returns the text as it is (no line numbers), at most %d lines or %d KB per call; "+
			"when there is more, a note at the end says which lines were shown and the offset to continue from. "+
			"Images (.png, .jpg, .jpeg, .gif, .webp, up to %d MB) come back as images. "+
			"Other binary files are not shown: use exec with xxd, base64 or file to inspect them.",
			readDefaultLimit, readMaxBytes>>10, imageMaxBytes>>20),
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Path of the file, absolute or relative to /workspace."},
    "offset": {"type": "integer", "minimum": 1, "description": "Line to start from, counting from 1. Default 1."},
    "limit": {"type": "integer", "minimum": 1, "description": "Number of lines to read. Default ` + fmt.Sprint(readDefaultLimit) + `."}
  },
  "required": ["path"],
  "additionalProperties": false
}`),
	},
	{
		Name: ToolWrite,
		Description: "Create or overwrite a file in the sandbox with the given content, creating parent folders as needed. " +
			"Relative paths are relative to /workspace. To change part of an existing file, prefer patch.",
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Path of the file, absolute or relative to /workspace."},
    "content": {"type": "string", "description": "The whole new content of the file."}
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`),
	},
	{
		Name: ToolPatch,
		Description: fmt.Sprintf("Edit a file in the sandbox by replacing one exact piece of text. "+
			"oldText must match the file exactly (whitespace and indentation included) and occur exactly once; "+
			"if it occurs more than once, include more surrounding lines to make it unique. "+
			"Read the file first. Files up to %d MB.", patchMaxBytes>>20),
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "Path of the file, absolute or relative to /workspace."},
    "oldText": {"type": "string", "minLength": 1, "description": "Exact text to replace; must occur exactly once in the file."},
    "newText": {"type": "string", "description": "Text to put in its place (may be empty to delete)."}
  },
  "required": ["path", "oldText", "newText"],
  "additionalProperties": false
}`),
	},
	{
		Name: ToolExec,
		Description: fmt.Sprintf("Run a shell command (sh -c) in the sandbox, in /workspace. "+
			"The tools on PATH (/tools/bin) include the agent's extra tools. "+
			"The result starts with \"Exit code: N\", then stdout and stderr together; "+
			"only the first %d KB of output is kept, so filter long output (grep, head, tail). "+
			"Default timeout %d seconds; on timeout the command and its children are killed. "+
			"Use read, write and patch for files rather than cat, echo or sed.",
			execOutputLimit>>10, int(ModelExecTimeout.Seconds())),
		Parameters: json.RawMessage(`{
  "type": "object",
  "properties": {
    "command": {"type": "string", "description": "The command line, run with sh -c."},
    "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": ` + fmt.Sprint(maxTimeoutSecs) + `, "description": "Timeout in seconds. Default ` + fmt.Sprint(int(ModelExecTimeout.Seconds())) + `."}
  },
  "required": ["command"],
  "additionalProperties": false
}`),
	},
}

// Definitions returns the core tools' definitions, for the model. The exec
// description states ModelExecTimeout as the default.
func Definitions() []Definition {
	out := make([]Definition, len(definitions))
	for i, d := range definitions {
		d.Parameters = append(json.RawMessage(nil), d.Parameters...)
		out[i] = d
	}
	return out
}
