//go:build benchplugins

// Package noop is a built-in plugin for benchmarks only: its tool noop does
// nothing, so that a call measures the tool bridge itself (launcher, tool
// client, socket, policy, audit, hooks). It is compiled in only with the
// build tag benchplugins (go run ./bench builds beige so); release builds do
// not have it.
package noop

import (
	"context"
	"embed"

	"github.com/beige-dev/beige/internal/plugin"
)

//go:embed plugin.json README.md SKILL.md
var docs embed.FS

func init() {
	plugin.Register(plugin.Builtin{Name: "noop", Docs: docs, New: func(plugin.Env) (plugin.Plugin, error) {
		return plugin.RegisterFunc(func(r *plugin.Registrar) error {
			return r.Tool(plugin.Tool{
				Name:        "noop",
				Description: "Does nothing (benchmarks).",
				Handler: func(context.Context, *plugin.Call) (plugin.Result, error) {
					return plugin.Result{}, nil
				},
			})
		}), nil
	}})
}
