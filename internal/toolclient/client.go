// Package toolclient is the tool client that runs in the sandbox: the
// launchers in /tools/bin exec `/beige/tool-client <tool> args...`, and the
// client sends the call to the gateway over /beige/gateway.sock, prints the
// answer and exits with the tool's exit code.
//
// It is compiled into the static in-sandbox binary, so it uses only the
// standard library and internal/proto, and not even package net.
//
// Exit codes besides the tool's own:
//
//	2    usage error, or arguments too large for one request
//	126  the gateway could not be reached, or its answer was unreadable
//	     (proto.ExitUnreachable)
package toolclient

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"unicode/utf8"

	"github.com/beige-dev/beige/internal/proto"
)

// Defaults, overridable through the environment for tests.
const (
	DefaultSocket = "/beige/gateway.sock"
	Workspace     = "/workspace"
	// SocketEnv names the variable that overrides DefaultSocket.
	SocketEnv = "BEIGE_GATEWAY_SOCKET"
)

// maxResponse bounds the response line read (tools cap their output well below).
const maxResponse = 256 << 20

// Main runs the client: args[0] is the tool's name, the rest its arguments;
// env looks up environment variables (os.Getenv). It returns the exit code.
func Main(args []string, env func(string) string, stdout, stderr io.Writer) int {
	wd, err := os.Getwd()
	if err != nil {
		wd = ""
	}
	return run(args, env, wd, stdout, stderr)
}

func run(args []string, env func(string) string, wd string, stdout, stderr io.Writer) int {
	if env == nil {
		env = func(string) string { return "" }
	}
	if len(args) == 0 || args[0] == "" {
		fmt.Fprintln(stderr, "usage: tool-client TOOL [ARG...]  (normally run by the launchers in /tools/bin)")
		return proto.ExitBadRequest
	}
	tool := args[0]
	if !proto.ValidToolName(tool) {
		fmt.Fprintf(stderr, "beige: invalid tool name %q\n", tool)
		return proto.ExitBadRequest
	}
	req := proto.ToolRequest{
		Type: proto.ToolRequestType,
		Tool: tool,
		Args: append([]string{}, args[1:]...),
		Cwd:  relCwd(wd),
	}
	for i, a := range req.Args {
		if strings.IndexByte(a, 0) >= 0 { // cannot happen with real argv
			fmt.Fprintf(stderr, "beige: argument %d contains a NUL byte\n", i+1)
			return proto.ExitBadRequest
		}
		if !utf8.ValidString(a) { // JSON would replace the bytes: the tool would get another argument
			fmt.Fprintf(stderr, "beige: argument %d is not valid UTF-8\n", i+1)
			return proto.ExitBadRequest
		}
	}
	sc := proto.SessionContext{
		SessionKey: env("BEIGE_SESSION_KEY"),
		Channel:    env("BEIGE_CHANNEL"),
		AgentName:  env("BEIGE_AGENT_NAME"),
		ChatID:     env("BEIGE_CHAT_ID"),
		ThreadID:   env("BEIGE_THREAD_ID"),
	}
	if sc != (proto.SessionContext{}) {
		req.SessionContext = &sc // informative: the gateway goes by the token
	}
	// The secret of the exec that runs us: the gateway's only way to tell
	// which session the call belongs to. One that is not a token is not sent.
	if tok := env(proto.CallTokenEnv); tok != "" && len(tok) <= proto.MaxCallToken && strings.Trim(tok, "0123456789abcdef") == "" {
		req.CallToken = tok
	}
	frame, err := proto.AppendToolFrame(nil, req)
	if err != nil {
		fmt.Fprintf(stderr, "beige: %v\n", err)
		return proto.ExitBadRequest
	}
	if len(frame)-1 > proto.MaxToolFrame {
		fmt.Fprintf(stderr, "beige: the arguments of %s are too large for one request (%d bytes; the limit is %d)\n",
			tool, len(frame)-1, proto.MaxToolFrame)
		return proto.ExitBadRequest
	}

	sock := env(SocketEnv)
	if sock == "" {
		sock = DefaultSocket
	}
	conn, err := dial(sock)
	if err != nil {
		fmt.Fprintf(stderr, "beige: cannot reach the gateway at %s: %v\n", sock, unwrapPath(err))
		return proto.ExitUnreachable
	}
	defer conn.Close()

	_, werr := conn.Write(frame)
	// Even when the write failed, the gateway may have answered (a refused
	// frame); read what is there.
	resp, rerr := readResponse(conn)
	if rerr != nil {
		cause := rerr
		if werr != nil {
			cause = werr
		}
		fmt.Fprintf(stderr, "beige: no answer from the gateway for %s: %v\n", tool, unwrapPath(cause))
		return proto.ExitUnreachable
	}
	if resp.Output != "" {
		io.WriteString(stdout, resp.Output)
	}
	if resp.Error != "" {
		msg := resp.Error
		if !strings.HasSuffix(msg, "\n") {
			msg += "\n"
		}
		io.WriteString(stderr, msg)
	}
	code := resp.ExitCode
	if code < 0 || code > 255 {
		code = 1
	}
	if !resp.Success && code == 0 {
		code = 1
	}
	return code
}

// relCwd returns wd relative to /workspace: "." for /workspace itself, ""
// when wd is outside it.
func relCwd(wd string) string {
	if wd == "" || !path.IsAbs(wd) {
		return ""
	}
	wd = path.Clean(wd)
	switch {
	case wd == Workspace:
		return "."
	case strings.HasPrefix(wd, Workspace+"/"):
		return wd[len(Workspace)+1:]
	}
	return ""
}

func readResponse(r io.Reader) (proto.ToolResponse, error) {
	br := bufio.NewReader(io.LimitReader(r, maxResponse))
	line, err := br.ReadBytes('\n')
	if err != nil && !(errors.Is(err, io.EOF) && len(line) > 0) {
		if errors.Is(err, io.EOF) {
			return proto.ToolResponse{}, errors.New("the connection closed without a response")
		}
		return proto.ToolResponse{}, err
	}
	var resp proto.ToolResponse
	if err := decodeResponse(line, &resp); err != nil {
		return resp, err
	}
	return resp, nil
}

// unwrapPath drops the *PathError/*SyscallError wrapping that repeats the
// socket path.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Err
	}
	return err
}

func decodeResponse(line []byte, resp *proto.ToolResponse) error {
	if err := json.Unmarshal(line, resp); err != nil {
		return fmt.Errorf("unreadable response: %v", err)
	}
	if resp.Type != proto.ToolResponseType {
		return fmt.Errorf("unexpected frame type %q", resp.Type)
	}
	return nil
}
