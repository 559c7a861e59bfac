package httpapi

import (
	"context"
	"net/http"

	"github.com/beige-dev/beige/internal/proto"
)

// Approver is the optional part of a Backend that lists and answers tool
// calls waiting for approval.
type Approver interface {
	Approvals(ctx context.Context) []proto.ApprovalRequest
	// AnswerApproval answers one; an unknown or already answered id is a
	// *proto.Error with status 404, a bad answer one with 400.
	AnswerApproval(ctx context.Context, id string, a proto.ApprovalAnswer) error
}

func (s *Server) approvals(w http.ResponseWriter, r *http.Request) {
	ap, ok := s.backend.(Approver)
	if !ok {
		s.notFound(w, r)
		return
	}
	list := ap.Approvals(r.Context())
	if list == nil {
		list = []proto.ApprovalRequest{}
	}
	WriteJSON(w, http.StatusOK, proto.ApprovalList{Approvals: list})
}

func (s *Server) answerApproval(w http.ResponseWriter, r *http.Request) {
	ap, ok := s.backend.(Approver)
	if !ok {
		s.notFound(w, r)
		return
	}
	var req proto.ApprovalAnswer
	if err := DecodeBody(r, &req); err != nil {
		s.writeErr(w, r, err)
		return
	}
	id := r.PathValue("id")
	if err := ap.AnswerApproval(r.Context(), id, req); err != nil {
		s.writeErr(w, r, err)
		return
	}
	WriteJSON(w, http.StatusOK, map[string]string{"id": id, "decision": req.Decision})
}
