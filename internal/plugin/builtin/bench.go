//go:build benchplugins

package builtin

import (
	_ "github.com/beige-dev/beige/internal/plugin/noop" // noop, for benchmarks only
)
