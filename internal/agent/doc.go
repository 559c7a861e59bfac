// Package agent is Beige's agent runtime: the loop that talks to a model and
// runs the tools it asks for, the sessions that hold each conversation, their
// files under $BEIGE_HOME/sessions, the system prompt and the compaction of
// long conversations.
//
// The runtime reaches the world through two small ports, so that the same
// loop serves the gateway and a terminal client that calls the model and the
// tools through the gateway's HTTP API:
//
//   - [Model] streams one model reply (the gateway's implementation falls
//     back across an agent's models; [ProviderModel] calls one provider);
//   - [Tools] lists the tools and runs one call (the gateway's runs the four
//     core tools in the agent's sandbox through its tool pipeline).
//
// [Loop] runs one prompt: model, tools, model… until the model stops.
// [Manager] owns the sessions of every agent: one prompt at a time per
// session (a second prompt waits, first come first served), many sessions
// at once, each persisted in pi's session file format (version 3) and
// resumed after a restart. [Manager.Steer] hands a user message to a
// session's running prompt, as pi's steer does.
package agent
