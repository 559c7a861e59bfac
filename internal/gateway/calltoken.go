package gateway

import "github.com/beige-dev/beige/internal/proto"

// callToken registers sc with agent's tool socket for the lifetime of one
// exec command (tools.CallTokens): the command's tool calls are attributed
// to sc by the token, and only while it runs.
func (g *Gateway) callToken(agent string, sc proto.SessionContext) (string, func()) {
	a := g.agents[agent]
	if a == nil || a.bridge == nil {
		return "", nil
	}
	return a.bridge.Attribute(sc)
}
