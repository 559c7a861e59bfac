// Package builtin decides which plugins are built into beige: importing it
// registers each of them (plugin.Register runs from their init functions).
// The gateway and `beige setup` import it for its side effects.
package builtin

import (
	_ "github.com/beige-dev/beige/internal/channel/telegram" // telegram
	_ "github.com/beige-dev/beige/internal/plugin/git"       // git
	_ "github.com/beige-dev/beige/internal/plugin/nodehost"  // TypeScript/JavaScript plugin folders
)
