package telegram

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// DefaultAPIURL is the Bot API server used unless the config names another.
const DefaultAPIURL = "https://api.telegram.org"

// Config is the plugin's configuration (plugins.telegram.config), merged
// with the defaultConfig of its plugin.json. Unknown fields are errors.
type Config struct {
	// Token is the bot's token from @BotFather, usually
	// "${TELEGRAM_BOT_TOKEN}". Required. It is never logged.
	Token string `json:"token"`
	// AllowedUsers are the Telegram users the bot answers: user ids
	// (numbers, or numeric strings) and "@usernames". Required; messages
	// from anyone else get no answer and a log line.
	AllowedUsers []AllowedUser `json:"allowedUsers"`
	// AgentMapping chooses the agent of a chat: "default" (required) for
	// every chat not listed, "<chatId>" for one chat, "<chatId>:<threadId>"
	// for one forum topic.
	AgentMapping map[string]string `json:"agentMapping"`
	// Defaults are the channel's session settings; a session overrides
	// them with /verbose and /streaming.
	Defaults Defaults `json:"defaults"`
	// APIURL is the Bot API server's base URL (DefaultAPIURL if empty),
	// for a self-hosted telegram-bot-api server, or a test.
	APIURL string `json:"apiUrl"`
}

// Defaults are the channel's defaults of the session settings; a nil field
// leaves the system default (plugin.SystemSettings).
type Defaults struct {
	Verbose   *bool `json:"verbose"`
	Streaming *bool `json:"streaming"`
}

// settings returns the defaults as PluginContext.Settings wants them.
func (d Defaults) settings() map[string]any {
	m := map[string]any{}
	if d.Verbose != nil {
		m["verbose"] = *d.Verbose
	}
	if d.Streaming != nil {
		m["streaming"] = *d.Streaming
	}
	return m
}

// AllowedUser is one entry of allowedUsers: a user id, or a username
// (kept without its "@", lower case).
type AllowedUser struct {
	ID       int64
	Username string
}

var usernameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{3,31}$`)

// UnmarshalJSON accepts 123456, "123456", "@name" and "name".
func (u *AllowedUser) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] != '"' {
		var f float64
		if err := json.Unmarshal(data, &f); err != nil {
			return fmt.Errorf("allowedUsers: %s is neither a user id nor an @username", data)
		}
		if f <= 0 || f != math.Trunc(f) || f > 1<<53 {
			return fmt.Errorf("allowedUsers: %s is not a Telegram user id", data)
		}
		u.ID = int64(f)
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	s = strings.TrimSpace(s)
	if id, err := strconv.ParseInt(s, 10, 64); err == nil {
		if id <= 0 {
			return fmt.Errorf("allowedUsers: %q is not a Telegram user id", s)
		}
		u.ID = id
		return nil
	}
	name := strings.TrimPrefix(s, "@")
	if !usernameRE.MatchString(name) {
		return fmt.Errorf("allowedUsers: %q is neither a user id nor an @username", s)
	}
	u.Username = strings.ToLower(name)
	return nil
}

// LogValue keeps the token out of logs.
func (c *Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("token", "[redacted]"),
		slog.Int("allowedUsers", len(c.AllowedUsers)),
		slog.Any("agentMapping", c.AgentMapping),
		slog.String("apiUrl", c.APIURL),
	)
}

// ParseConfig decodes and checks the plugin's config; name is the plugin's
// key in config.json5, for error messages ("plugins.<name>.config.token").
func ParseConfig(name string, raw map[string]any) (*Config, error) {
	if name == "" {
		name = Name
	}
	field := func(f string) string { return "plugins." + name + ".config." + f }
	data, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	var c Config
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("%s: %w", "plugins."+name+".config", decodeError(err))
	}

	var errs []error
	c.Token = strings.TrimSpace(c.Token)
	switch {
	case c.Token == "":
		errs = append(errs, fmt.Errorf("%s is missing: set it to the bot token from @BotFather, e.g. \"${TELEGRAM_BOT_TOKEN}\"", field("token")))
	case strings.Contains(c.Token, "${"):
		errs = append(errs, fmt.Errorf("%s holds an unexpanded ${...} reference", field("token")))
	case strings.ContainsAny(c.Token, "/?# \t\n"):
		errs = append(errs, fmt.Errorf("%s is not a bot token (it holds '/', '?', '#' or spaces)", field("token")))
	}
	if len(c.AllowedUsers) == 0 {
		errs = append(errs, fmt.Errorf("%s is missing or empty: list the Telegram user ids (or @usernames) the bot may answer", field("allowedUsers")))
	}
	if c.AgentMapping["default"] == "" {
		errs = append(errs, fmt.Errorf("%s is missing: name the agent that answers chats not listed in agentMapping", field("agentMapping.default")))
	}
	for _, k := range slices.Sorted(maps.Keys(c.AgentMapping)) {
		if k == "default" {
			continue
		}
		if !validChatKey(k) {
			errs = append(errs, fmt.Errorf("%s: key %q is not a chat id (\"-1001234567890\") or \"<chatId>:<threadId>\"", field("agentMapping"), k))
		}
		if c.AgentMapping[k] == "" {
			errs = append(errs, fmt.Errorf("%s names no agent", field("agentMapping."+k)))
		}
	}
	if c.APIURL == "" {
		c.APIURL = DefaultAPIURL
	}
	c.APIURL = strings.TrimRight(c.APIURL, "/")
	if u, err := url.Parse(c.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("%s: %q is not an http(s) URL", field("apiUrl"), c.APIURL))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return &c, nil
}

// Warnings are the config's risks that are not errors: an allowedUsers
// entry that is a @username lets in whoever holds that name next (users
// can change or drop theirs, and someone else can take it).
func (c *Config) Warnings(name string) []string {
	if name == "" {
		name = Name
	}
	var out []string
	for _, u := range c.AllowedUsers {
		if u.Username != "" {
			out = append(out, fmt.Sprintf("plugins.%s.config.allowedUsers: \"@%s\" is a username, which can change hands: whoever holds it next is let in; list the numeric user id instead (the gateway log shows it for each message refused)", name, u.Username))
		}
	}
	return out
}

// checkAgents reports agents of the mapping that are not configured.
func (c *Config) checkAgents(name string, agents []string) error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(c.AgentMapping)) {
		if a := c.AgentMapping[k]; !slices.Contains(agents, a) {
			errs = append(errs, fmt.Errorf("plugins.%s.config.agentMapping.%s: no agent %q is configured (agents: %s)",
				name, k, a, strings.Join(agents, ", ")))
		}
	}
	return errors.Join(errs...)
}

// agentFor returns the agent of a chat (and thread, 0 for none).
func (c *Config) agentFor(chatID int64, threadID int) string {
	chat := strconv.FormatInt(chatID, 10)
	if threadID != 0 {
		if a := c.AgentMapping[chat+":"+strconv.Itoa(threadID)]; a != "" {
			return a
		}
	}
	if a := c.AgentMapping[chat]; a != "" {
		return a
	}
	return c.AgentMapping["default"]
}

// allowed reports whether a user may talk to the bot.
func (c *Config) allowed(id int64, username string) bool {
	username = strings.ToLower(username)
	for _, u := range c.AllowedUsers {
		if (u.ID != 0 && u.ID == id) || (u.Username != "" && u.Username == username) {
			return true
		}
	}
	return false
}

func validChatKey(k string) bool {
	chat, thread, hasThread := strings.Cut(k, ":")
	if _, err := strconv.ParseInt(chat, 10, 64); err != nil {
		return false
	}
	if hasThread {
		if n, err := strconv.Atoi(thread); err != nil || n <= 0 {
			return false
		}
	}
	return true
}

func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		return fmt.Errorf("%s: expected %s, got %s", te.Field, te.Type, te.Value)
	}
	if s, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("unknown field %s", s)
	}
	return errors.New(strings.TrimPrefix(err.Error(), "json: "))
}
