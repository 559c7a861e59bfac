// Package sandbox holds the default sandbox image's Dockerfile, embedded
// so that `beige sandbox build` needs nothing but the binary.
package sandbox

import _ "embed"

// Dockerfile is sandbox/Dockerfile.
//
//go:embed Dockerfile
var Dockerfile []byte
