package telegram

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/go-telegram/bot"
	"github.com/go-telegram/bot/models"

	"github.com/beige-dev/beige/internal/plugin"
)

// pollTimeout is the long-polling timeout: getUpdates waits up to
// pollTimeout-1s on Telegram's side. An HTTP request gives up after
// pollTimeout+httpSlack.
const (
	pollTimeout = 30 * time.Second
	httpSlack   = 15 * time.Second
)

// setupTimeout bounds the calls Start makes (getMe, the command menu).
const setupTimeout = 10 * time.Second

// run is one Start of the channel: the bot, its polling and the chats'
// work, until its context ends.
type run struct {
	p     *Plugin
	cfg   *Config
	pc    plugin.PluginContext
	log   *slog.Logger
	bot   *bot.Bot
	tr    *http.Transport
	store *store
	// ctx is the work's: it ends when Stop's drain is over (or the run
	// fails), not with Start's context.
	ctx    context.Context
	cancel context.CancelFunc // ends the work and the polling
	// pollCtx is the polling's: it ends with Start's context, at Stop, or
	// with ctx. Then the run drains: no new work starts, what runs goes on.
	pollCtx    context.Context
	pollCancel context.CancelFunc
	stopWatch  func() bool // ends the watch on Start's context

	wg   sync.WaitGroup // every goroutine of the run
	jobs sync.WaitGroup // the commands and prompts running
	done chan struct{}  // closed when the run has ended

	approvals *approvals // nil when the gateway offers none

	mu       sync.Mutex
	draining bool   // Stop was called: no more work is started
	username string // the bot's @username, without "@"; "" until known
	queues   map[string]*queue
	turns    map[string]*turn // the running prompt of each session
	lastErr  string
	lastErrT time.Time
}

// turn is a running prompt.
type turn struct {
	stopped atomic.Bool // /stop aborted it
}

func newRun(ctx context.Context, p *Plugin, pc plugin.PluginContext) (*run, error) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 4
	r := &run{
		p: p, cfg: p.cfg, pc: pc, log: p.log, tr: tr,
		done:   make(chan struct{}),
		queues: map[string]*queue{},
		turns:  map[string]*turn{},
	}
	st, err := openStore(p.dataDir, p.log)
	if err != nil {
		return nil, err
	}
	r.store = st
	workCtx, workCancel := context.WithCancel(context.WithoutCancel(ctx))
	r.ctx = workCtx
	r.pollCtx, r.pollCancel = context.WithCancel(ctx)
	r.cancel = func() {
		r.drain()
		workCancel()
	}
	r.stopWatch = context.AfterFunc(ctx, r.drain)
	b, err := bot.New(p.cfg.Token,
		// Polling resumes after the last update the queue accepted, and an
		// update is handed over (and so confirmed to Telegram by the next
		// getUpdates) only once the handler took the one before it.
		bot.WithInitialOffset(st.offset(time.Now())),
		bot.WithUpdatesChannelCap(0),
		bot.WithSkipGetMe(),
		bot.WithServerURL(p.cfg.APIURL),
		bot.WithHTTPClient(pollTimeout, &http.Client{Transport: tr, Timeout: pollTimeout + httpSlack}),
		bot.WithErrorsHandler(r.pollError),
		bot.WithDefaultHandler(r.onUpdate),
		bot.WithNotAsyncHandlers(),
		bot.WithAllowedUpdates(bot.AllowedUpdates{"message", "callback_query"}),
		bot.WithWorkers(1),
	)
	if err != nil {
		r.cancel()
		return nil, fmt.Errorf("telegram: %s", r.redact(err))
	}
	r.bot = b
	return r, nil
}

// start learns the bot's name, replaces its command menu and starts
// polling. A token Telegram refuses is an error; when Telegram cannot be
// reached, the channel starts anyway and keeps trying in the background.
func (r *run) start() error {
	r.wg.Add(1) // held until start returns, so that done waits for it
	go func() {
		r.wg.Wait()
		r.stopWatch()
		r.tr.CloseIdleConnections()
		close(r.done)
	}()
	defer r.wg.Done()
	err := r.setup()
	var fatal *setupError
	switch {
	case errors.As(err, &fatal):
		r.cancel()
		return err
	case err != nil:
		r.log.Warn("telegram: cannot reach the Bot API yet; retrying in the background", "error", r.redact(err))
		r.wg.Add(1)
		go r.retrySetup()
	}
	left, err := r.store.restore()
	if err != nil {
		r.log.Error("telegram: cannot save the queue of waiting messages", "error", err)
	}
	if len(left) > 0 {
		r.log.Info("telegram: answering the messages left by the last run", "count", len(left))
	}
	for _, in := range left {
		r.dispatch(in)
	}
	r.startApprovals()
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.bot.Start(r.pollCtx) // returns when the polling ends
	}()
	r.log.Info("telegram: polling", "bot", "@"+r.botName(), "apiUrl", r.cfg.APIURL)
	return nil
}

// setupError is a setup failure that retrying will not cure.
type setupError struct{ msg string }

func (e *setupError) Error() string { return e.msg }

// setup calls getMe, then deletes the bot's commands and registers its own.
func (r *run) setup() error {
	ctx, cancel := context.WithTimeout(r.ctx, setupTimeout)
	defer cancel()
	me, err := r.bot.GetMe(ctx)
	if err != nil {
		if errors.Is(err, bot.ErrorUnauthorized) || errors.Is(err, bot.ErrorNotFound) {
			return &setupError{msg: "telegram: the Bot API refused the token (getMe: " + r.redact(err) + "); check plugins." + r.p.name + ".config.token"}
		}
		return err
	}
	r.mu.Lock()
	r.username = me.Username
	r.mu.Unlock()
	r.setCommands(ctx)
	return nil
}

// setCommands replaces the bot's command menu: the commands other
// programs left are deleted first.
func (r *run) setCommands(ctx context.Context) {
	if _, err := withRetry(ctx, func(ctx context.Context) (bool, error) {
		return r.bot.DeleteMyCommands(ctx, &bot.DeleteMyCommandsParams{})
	}); err != nil {
		r.log.Warn("telegram: deleteMyCommands failed", "error", r.redact(err))
	}
	if _, err := withRetry(ctx, func(ctx context.Context) (bool, error) {
		return r.bot.SetMyCommands(ctx, &bot.SetMyCommandsParams{Commands: menu()})
	}); err != nil {
		r.log.Warn("telegram: setMyCommands failed", "error", r.redact(err))
	}
}

// retrySetup retries setup with a growing delay until it works or the run
// ends.
func (r *run) retrySetup() {
	defer r.wg.Done()
	delay := time.Second
	for {
		if !sleep(r.ctx, delay) {
			return
		}
		err := r.setup()
		if err == nil {
			r.log.Info("telegram: reached the Bot API", "bot", "@"+r.botName())
			return
		}
		var fatal *setupError
		if errors.As(err, &fatal) {
			r.log.Error(fatal.msg)
			r.cancel()
			return
		}
		delay = min(delay*2, time.Minute)
	}
}

func (r *run) botName() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.username
}

// stop ends the polling, lets the running prompts and commands finish as
// long as ctx allows (what has not started stays in the queue for the next
// start), then ends the run and waits for it.
func (r *run) stop(ctx context.Context) error {
	r.drain()
	idle := make(chan struct{})
	go func() {
		r.jobs.Wait()
		close(idle)
	}()
	// Leave a part of ctx's time for the cancelled work to end.
	until := ctx
	if d, ok := ctx.Deadline(); ok {
		var cancel context.CancelFunc
		until, cancel = context.WithDeadline(ctx, d.Add(-min(time.Second, time.Until(d)/4)))
		defer cancel()
	}
	select {
	case <-idle:
	case <-until.Done():
		r.log.Warn("telegram: stopping: the running answers did not finish in time; they are answered again at the next start")
	case <-r.ctx.Done():
	}
	r.cancel()
	select {
	case <-r.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("telegram: stop: %w", ctx.Err())
	}
}

// drain ends the polling; no more work is started (what is queued stays
// in the durable queue for the next start), what runs goes on.
func (r *run) drain() {
	r.mu.Lock()
	r.draining = true
	r.mu.Unlock()
	r.pollCancel()
}

func (r *run) isDraining() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.draining
}

func (r *run) finished() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// pollError receives the bot library's errors (mostly failed getUpdates
// calls, which it retries with a growing delay up to 5 s). A refused token
// stops the channel; the same error is logged at most once a minute.
func (r *run) pollError(err error) {
	if r.pollCtx.Err() != nil {
		return
	}
	msg := r.redact(err)
	if errors.Is(err, bot.ErrorUnauthorized) {
		r.log.Error("telegram: the Bot API refused the token; the channel stops", "error", msg)
		r.cancel()
		return
	}
	r.mu.Lock()
	repeat := msg == r.lastErr && time.Since(r.lastErrT) < time.Minute
	if !repeat {
		r.lastErr, r.lastErrT = msg, time.Now()
	}
	r.mu.Unlock()
	if !repeat {
		r.log.Warn("telegram: Bot API error", "error", msg)
	}
}

func (r *run) logSendError(t target, err error) {
	if r.ctx.Err() != nil {
		return
	}
	r.log.Warn("telegram: sending failed", "chat_id", t.chat, "error", r.redact(err))
}

// onUpdate receives each update, in order, on the library's one worker. It
// must not block: it checks the sender, writes the update to the durable
// queue and queues the work.
func (r *run) onUpdate(_ context.Context, _ *bot.Bot, upd *models.Update) {
	if upd == nil || r.ctx.Err() != nil {
		return
	}
	if upd.CallbackQuery != nil {
		r.onCallback(upd.CallbackQuery)
	}
	in := r.intake(upd)
	if in != nil && in.Text != "" {
		if name, _, kind := parseCommand(in.Text, r.botName()); kind == isCommand && name == "stop" {
			// Not queued: it must reach a running prompt.
			t := r.inboundTarget(*in)
			r.wg.Add(1)
			go func() {
				defer r.wg.Done()
				r.reply(t, r.cmdStop(t))
			}()
			in = nil
		}
	}
	fresh, err := r.store.accept(upd.ID, in)
	switch {
	case !fresh:
		r.log.Debug("telegram: update already queued, ignored", "update_id", upd.ID)
		return
	case errors.Is(err, errQueueFull):
		r.log.Warn("telegram: too many messages waiting; one refused", "chat_id", in.ChatID, "max", maxQueued)
		t := r.inboundTarget(*in)
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			r.reply(t, "😢 Too many messages are waiting; this one was not taken. Please send it again later.")
		}()
		return
	case err != nil:
		r.log.Error("telegram: cannot save the queue of waiting messages; a restart would lose this one", "error", err)
	}
	if in != nil {
		r.dispatch(*in)
	}
}

// intake returns the message of an update that needs work, nil for one
// that is ignored (not a message, from no user, a bot or a user not
// allowed, without text or media).
func (r *run) intake(upd *models.Update) *inbound {
	msg := upd.Message
	if msg == nil {
		return nil
	}
	from := msg.From
	if from == nil || from.IsBot {
		r.log.Debug("telegram: message without a user sender, ignored", "chat_id", msg.Chat.ID)
		return nil
	}
	if !r.cfg.allowed(from.ID, from.Username) {
		r.log.Warn("telegram: message from a user not in allowedUsers, ignored",
			"user_id", from.ID, "username", from.Username, "chat_id", msg.Chat.ID)
		return nil
	}
	in := &inbound{
		UpdateID: upd.ID, MsgID: msg.ID, ChatID: msg.Chat.ID, ChatType: string(msg.Chat.Type),
		FromID: from.ID, FromName: from.Username, Text: strings.TrimSpace(msg.Text),
		Received: time.Now().UTC(),
	}
	if msg.MessageThreadID != 0 && (msg.IsTopicMessage || msg.Chat.IsForum || msg.ReplyToMessage == nil) {
		// A message_thread_id names a forum topic; in a group without
		// topics it names a reply chain, which stays in the chat's session.
		in.ThreadID = msg.MessageThreadID
	}
	if in.Text == "" {
		if msg.Chat.Type != models.ChatTypePrivate || !hasMedia(msg) {
			return nil
		}
		in.Media = true
	}
	return in
}

// dispatch queues the work of an accepted message. The sender is checked
// again: the queue may come from a run with another allowedUsers.
func (r *run) dispatch(in inbound) {
	t := r.inboundTarget(in)
	if !r.cfg.allowed(in.FromID, in.FromName) {
		r.log.Warn("telegram: queued message from a user no longer in allowedUsers, dropped",
			"user_id", in.FromID, "chat_id", in.ChatID)
		r.store.done(in.UpdateID)
		return
	}
	if in.Attempts > maxAttempts {
		r.log.Error("telegram: a message was tried at too many starts; given up",
			"chat_id", in.ChatID, "update_id", in.UpdateID, "attempts", in.Attempts-1)
		r.enqueueCommand(t, in.UpdateID, func(ctx context.Context) string {
			r.reply(t, "😢 Sorry, I could not answer one of your messages: the gateway stopped each time it was worked on.")
			r.react(ctx, t, in.MsgID, reactionFailed)
			return ""
		})
		return
	}
	if in.Text == "" {
		r.enqueueCommand(t, in.UpdateID, func(ctx context.Context) string {
			return "Sorry, I can only read text messages."
		})
		return
	}
	name, args, kind := parseCommand(in.Text, r.botName())
	switch kind {
	case forOtherBot:
		r.store.done(in.UpdateID)
		return
	case isCommand:
		if name == "stop" { // only from an old queue: a /stop cannot wait
			r.store.done(in.UpdateID)
			return
		}
		r.enqueueCommand(t, in.UpdateID, func(ctx context.Context) string { return r.command(ctx, t, name, args) })
		return
	}
	if r.steer(t, in) {
		return
	}
	r.enqueuePrompt(t, in)
}

// steer hands a message for a session whose prompt runs, with no other
// message waiting before it, to that prompt (plugin.Steerer), as the
// original's telegram plugin does: it is taken after the running tool
// call, whose remaining calls are skipped, and the prompt's answer answers
// it too. It reports whether it did; otherwise the message waits its turn.
// A steered message gets the receipt reaction only: the prompt it joined
// owns the answer and the done reaction.
func (r *run) steer(t target, in inbound) bool {
	st, ok := r.pc.(plugin.Steerer)
	if !ok {
		return false
	}
	r.mu.Lock()
	running := r.turns[t.key] != nil
	q := r.queues[t.key]
	waiting := q != nil && len(q.prompts) > 0
	r.mu.Unlock()
	if !running || waiting {
		return false
	}
	// runningOnly: if the prompt ends before it would take the message,
	// the message is refused and waits its turn instead.
	ok, err := st.Steer(r.ctx, t.agent, t.key, in.Text, true)
	if err != nil {
		r.log.Warn("telegram: the message could not steer the running prompt; it waits its turn", "session", t.key, "error", r.redactSecrets(err.Error()))
		return false
	}
	if !ok {
		return false
	}
	r.log.Info("telegram: message steers the running prompt", "agent", t.agent, "session", t.key)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.react(r.ctx, t, in.MsgID, reactionSeen)
	}()
	r.store.done(in.UpdateID)
	return true
}

func hasMedia(m *models.Message) bool {
	return m.Photo != nil || m.Document != nil || m.Voice != nil || m.Audio != nil ||
		m.Video != nil || m.VideoNote != nil || m.Sticker != nil || m.Animation != nil
}

// inboundTarget is where a message's session lives.
func (r *run) inboundTarget(in inbound) target {
	t := target{chatID: in.ChatID, chat: strconv.FormatInt(in.ChatID, 10), threadID: in.ThreadID}
	t.key = sessionKey(r.p.name, t.chatID, t.threadID)
	t.agent = r.cfg.agentFor(t.chatID, t.threadID)
	return t
}

// queue is the work of one session: commands run one at a time, in order;
// prompts run one at a time, in order, each after the commands sent before
// it — but commands do not wait for prompts.
type queue struct {
	cmds       []job
	cmdBusy    bool
	prompts    []job
	promptBusy bool
	lastCmd    chan struct{} // closed when the last queued command is done
}

type job struct {
	run   func()
	after <-chan struct{} // for prompts: the commands before it
	drop  func()          // for prompts: called instead of run when dropped
}

// enqueueCommand queues a command of the update updateID: fn runs it and
// returns the reply, sent as plain text; then the update is done.
func (r *run) enqueueCommand(t target, updateID int64, fn func(ctx context.Context) string) {
	done := make(chan struct{})
	j := job{run: func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(r.ctx, commandTimeout)
		defer cancel()
		if text := fn(ctx); text != "" {
			r.reply(t, text)
		}
		if r.ctx.Err() == nil {
			r.store.done(updateID)
		}
	}}
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queue(t.key)
	q.cmds = append(q.cmds, j)
	q.lastCmd = done
	if !q.cmdBusy {
		q.cmdBusy = true
		r.wg.Add(1)
		go r.work(t.key, q, true)
	}
}

func (r *run) enqueuePrompt(t target, in inbound) {
	seen := make(chan struct{})
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(seen)
		r.react(r.ctx, t, in.MsgID, reactionSeen)
	}()
	j := job{
		run: func() { r.runPrompt(t, in, seen) },
		drop: func() {
			<-seen
			r.react(r.ctx, t, in.MsgID, reactionNone)
			r.store.done(in.UpdateID)
		},
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	q := r.queue(t.key)
	j.after = q.lastCmd
	q.prompts = append(q.prompts, j)
	if !q.promptBusy {
		q.promptBusy = true
		r.wg.Add(1)
		go r.work(t.key, q, false)
	}
}

// queue returns the queue of a session, creating it; r.mu is held.
func (r *run) queue(key string) *queue {
	q := r.queues[key]
	if q == nil {
		q = &queue{}
		r.queues[key] = q
	}
	return q
}

// work runs the commands (or the prompts) of a session until none is
// left, or the run drains or ends: what has not started then stays in the
// durable queue, for the next start.
func (r *run) work(key string, q *queue, cmds bool) {
	defer r.wg.Done()
	for {
		r.mu.Lock()
		list, busy := &q.prompts, &q.promptBusy
		if cmds {
			list, busy = &q.cmds, &q.cmdBusy
		}
		if len(*list) == 0 || r.draining || r.ctx.Err() != nil {
			*list = nil
			*busy = false
			if !q.cmdBusy && !q.promptBusy && r.queues[key] == q {
				delete(r.queues, key)
			}
			r.mu.Unlock()
			return
		}
		j := (*list)[0]
		*list = (*list)[1:]
		r.jobs.Add(1)
		r.mu.Unlock()
		r.runJob(j)
	}
}

// runJob runs a job once the commands before it are done, unless the run
// drains or ends first.
func (r *run) runJob(j job) {
	defer r.jobs.Done()
	if j.after != nil {
		select {
		case <-j.after:
		case <-r.ctx.Done():
			return
		}
		r.mu.Lock()
		draining := r.draining
		r.mu.Unlock()
		if draining {
			return
		}
	}
	j.run()
}

// dropPrompts removes the prompts of a session that have not started; it
// returns how many there were.
func (r *run) dropPrompts(key string) int {
	r.mu.Lock()
	var dropped []job
	if q := r.queues[key]; q != nil {
		dropped, q.prompts = q.prompts, nil
	}
	r.mu.Unlock()
	for _, j := range dropped {
		if j.drop != nil {
			j.drop()
		}
	}
	return len(dropped)
}

// reply sends a command's answer as plain text.
func (r *run) reply(t target, text string) {
	if _, err := r.sendPlain(r.ctx, t, text); err != nil {
		r.logSendError(t, err)
	}
}

// runPrompt sends one message to the agent and the answer to the chat.
// The update is done once the answer was delivered, or the user was told
// why not; if the run ends first it stays queued, for the next start.
func (r *run) runPrompt(t target, in inbound, seen <-chan struct{}) {
	settings := r.pc.Settings(t.key, r.cfg.Defaults.settings())
	verbose := boolSetting(settings, "verbose", false)
	streaming := boolSetting(settings, "streaming", true)

	tu := &turn{}
	r.mu.Lock()
	r.turns[t.key] = tu
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		if r.turns[t.key] == tu {
			delete(r.turns, t.key)
		}
		r.mu.Unlock()
	}()

	stopTyping := r.typing(t)
	rep := newReply(r, t, streaming)
	req := plugin.PromptRequest{Agent: t.agent, SessionKey: t.key, Message: in.Text, OnEvent: rep.onEvent}
	if verbose {
		req.OnToolStart = rep.onToolStart
	}
	res, err := r.pc.Prompt(r.ctx, req)
	stopTyping()

	reaction := reactionDone
	told := true // the user has the answer, or knows there is none
	switch {
	case r.ctx.Err() != nil, err != nil && r.isDraining():
		// Shutting down (the gateway cancels the prompts it could not
		// drain): answered by the next start.
		rep.finish("", false)
		return
	case err != nil && tu.stopped.Load():
		rep.finish("", false)
		reaction = reactionNone
	case err != nil:
		rep.finish("", false)
		r.log.Warn("telegram: prompt failed", "agent", t.agent, "session", t.key, "error", r.redactSecrets(err.Error()))
		reaction = reactionFailed
		told = r.tell(t, "⚠️ Sorry, no answer: "+userError(err)+" The gateway log has the details.")
	default:
		answer := ""
		if res != nil {
			answer = res.Text
		}
		lost := rep.finish(answer, true)
		if errors.Is(lost, errUnfinished) || r.ctx.Err() != nil {
			return
		}
		if lost != nil {
			r.log.Warn("telegram: an answer could not be delivered", "agent", t.agent, "session", t.key, "error", r.redactSecrets(lost.Error()))
			reaction = reactionFailed
			told = r.tell(t, "😢 Sorry, the answer could not be delivered"+deliveryReason(lost)+".")
		}
	}
	if told {
		r.store.done(in.UpdateID)
	}
	select {
	case <-seen:
	case <-r.ctx.Done():
		return
	}
	r.react(r.ctx, t, in.MsgID, reaction)
}

// tell sends the user a short note (why there is no answer); it reports
// whether it was delivered.
func (r *run) tell(t target, text string) bool {
	if _, err := r.sendPlain(r.ctx, t, text); err != nil {
		r.logSendError(t, err)
		return false
	}
	return true
}

// boolSetting reads a boolean setting, accepting "on"/"off" strings too.
func boolSetting(m map[string]any, name string, def bool) bool {
	switch v := m[name].(type) {
	case bool:
		return v
	case string:
		if b, ok := parseOnOff(v); ok {
			return b
		}
	}
	return def
}

// clip shortens s to at most n bytes, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
