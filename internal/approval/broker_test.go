package approval

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestRulesMatch(t *testing.T) {
	r := Rules{Exec: []string{"git push*", "rm -rf*"}, Tools: []string{"github", "git push"}}
	cases := []struct {
		tool string
		args []string
		rule string
	}{
		{"exec", []string{"git push origin main"}, "exec:git push*"},
		{"exec", []string{"rm -rf /"}, "exec:rm -rf*"},
		{"exec", []string{"git status"}, ""},
		{"exec", nil, ""},
		{"github", nil, "tools:github"},
		{"github", []string{"pr", "merge", "1"}, "tools:github"},
		{"githubx", []string{"pr"}, ""},
		{"git", []string{"push", "origin"}, "tools:git push"},
		{"git", []string{"push"}, "tools:git push"},
		{"git", []string{"pull"}, ""},
		{"read", []string{"a.txt"}, ""},
	}
	for _, tc := range cases {
		got, ok := r.Match(tc.tool, tc.args)
		if got != tc.rule || ok != (tc.rule != "") {
			t.Errorf("Match(%q, %q) = %q, %v; want %q", tc.tool, tc.args, got, ok, tc.rule)
		}
	}
}

// waitPending returns the first pending request once there is one.
func waitPending(t *testing.T, b *Broker) Request {
	t.Helper()
	for range 500 {
		if p := b.Pending(""); len(p) > 0 {
			return p[0]
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatal("no pending request")
	return Request{}
}

func TestBroker(t *testing.T) {
	req := Request{Agent: "a", Session: "s1", Tool: "exec", Args: []string{"git push"}, Rule: "exec:git push*"}
	cases := []struct {
		name     string
		answer   *Answer
		approved bool
		timedOut bool
	}{
		{"approve", &Answer{Decision: Approve, By: "ann", Via: "webui"}, true, false},
		{"deny", &Answer{Decision: Deny, By: "bob", Via: "telegram"}, false, false},
		{"always", &Answer{Decision: Always, By: "ann", Via: "tui"}, true, false},
		{"timeout", nil, false, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := New(Options{})
			var mu sync.Mutex
			var events []string
			cancel := b.Subscribe(func(e Event) { mu.Lock(); events = append(events, e.Type); mu.Unlock() })
			defer cancel()
			timeout := 5 * time.Second
			if tc.answer == nil {
				timeout = 30 * time.Millisecond
			}
			type res struct {
				o   Outcome
				err error
			}
			done := make(chan res, 1)
			go func() { o, err := b.Wait(context.Background(), req, timeout); done <- res{o, err} }()
			if tc.answer != nil {
				p := waitPending(t, b)
				if p.ID == "" || p.Tool != "exec" || p.Rule != req.Rule || !p.Expires.After(p.Created) {
					t.Errorf("pending %+v", p)
				}
				if err := b.Answer(p.ID, *tc.answer); err != nil {
					t.Fatal(err)
				}
				// The first answer wins.
				if err := b.Answer(p.ID, Answer{Decision: Approve}); !errors.Is(err, ErrNotPending) {
					t.Errorf("second answer: %v", err)
				}
			}
			r := <-done
			if r.err != nil || r.o.Approved != tc.approved || r.o.TimedOut != tc.timedOut {
				t.Fatalf("outcome %+v, %v", r.o, r.err)
			}
			if tc.answer != nil && r.o.Answer.Who() != tc.answer.By+" via "+tc.answer.Via {
				t.Errorf("who = %q", r.o.Answer.Who())
			}
			if len(b.Pending("")) != 0 {
				t.Error("request still pending")
			}
			mu.Lock()
			if len(events) != 2 || events[0] != EventPending || events[1] != EventResolved {
				t.Errorf("events %v", events)
			}
			mu.Unlock()
			// "always" stops asking in this session only.
			remembered := b.Remembered("a", "s1", req.Rule)
			if remembered != (tc.name == "always") {
				t.Errorf("remembered = %v", remembered)
			}
			if b.Remembered("a", "s2", req.Rule) || b.Remembered("b", "s1", req.Rule) || b.Remembered("a", "s1", "exec:other") {
				t.Error("always leaked to another session, agent or rule")
			}
			if tc.name == "always" {
				o, err := b.Wait(context.Background(), req, time.Millisecond)
				if err != nil || !o.Approved || !o.Remembered {
					t.Errorf("after always: %+v, %v", o, err)
				}
			}
		})
	}
}

func TestBrokerContextEnds(t *testing.T) {
	b := New(Options{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { waitPending(t, b); cancel() }()
	o, err := b.Wait(ctx, Request{Agent: "a", Tool: "exec"}, time.Minute)
	if !errors.Is(err, context.Canceled) || o.Approved {
		t.Fatalf("%+v, %v", o, err)
	}
	if err := b.Answer("nope", Answer{Decision: "maybe"}); err == nil {
		t.Error("bad decision accepted")
	}
	if err := b.Answer("nope", Answer{Decision: Approve}); !errors.Is(err, ErrNotPending) {
		t.Errorf("unknown id: %v", err)
	}
}

// TestAlwaysNeedsSession: a call without a session (the HTTP exec
// endpoint) is asked every time, since "this session" names nothing.
func TestAlwaysNeedsSession(t *testing.T) {
	b := New(Options{})
	req := Request{Agent: "a", Tool: "exec", Rule: "exec:*"}
	go func() { p := waitPending(t, b); _ = b.Answer(p.ID, Answer{Decision: Always}) }()
	if o, err := b.Wait(context.Background(), req, time.Minute); err != nil || !o.Approved {
		t.Fatalf("%+v %v", o, err)
	}
	if b.Remembered("a", "", "exec:*") {
		t.Error("always remembered without a session")
	}
}
