// The login form: the token goes to POST /ui/login, which answers with the
// HttpOnly cookie; the page never keeps the token itself.
const form = document.getElementById("login");
const error = document.getElementById("error");
form.addEventListener("submit", async (ev) => {
  ev.preventDefault();
  error.textContent = "";
  const token = document.getElementById("token").value;
  try {
    const res = await fetch("/ui/login", {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ token }),
      credentials: "same-origin",
    });
    if (res.ok) {
      location.replace("/ui/");
      return;
    }
    const body = await res.json().catch(() => ({}));
    error.textContent = body.error || `login failed (${res.status})`;
  } catch (e) {
    error.textContent = `login failed: ${e.message}`;
  }
});
