// Package deptest holds only a test: the table of which packages must not
// depend on which (the terminal client links no Docker SDK and no server,
// the HTTP API no agent loop, the wire types nothing of ours), checked over
// `go list -deps -json`, in the spirit of Tailscale's deptest. Run it with
// go test ./internal/deptest; it is skipped under -short.
package deptest
