// A minimal Markdown renderer that builds DOM nodes: model output is
// hostile, so no string of it is ever parsed as HTML (no innerHTML); text
// goes in through textContent / createTextNode only. It knows paragraphs,
// headings, fenced code, lists, quotes, inline code, bold, italics and
// links (http, https and mailto only).

export function renderMarkdown(src) {
  const root = document.createDocumentFragment();
  const lines = String(src).replace(/\r\n?/g, "\n").split("\n");
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s*(```|~~~)\s*([\w+-]*)\s*$/);
    if (fence) {
      const code = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) code.push(lines[i++]);
      i++;
      const pre = el("pre");
      const c = el("code");
      if (fence[2]) c.dataset.lang = fence[2];
      c.textContent = code.join("\n");
      pre.append(c);
      root.append(pre);
      continue;
    }
    if (/^\s*$/.test(line)) { i++; continue; }
    const h = line.match(/^(#{1,6})\s+(.*)$/);
    if (h) {
      const n = el("h" + Math.min(6, h[1].length + 2));
      inline(n, h[2]);
      root.append(n);
      i++;
      continue;
    }
    if (/^\s*([-*+]|\d+[.)])\s+/.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const list = el(ordered ? "ol" : "ul");
      while (i < lines.length && /^\s*([-*+]|\d+[.)])\s+/.test(lines[i])) {
        const li = el("li");
        inline(li, lines[i].replace(/^\s*([-*+]|\d+[.)])\s+/, ""));
        list.append(li);
        i++;
      }
      root.append(list);
      continue;
    }
    if (/^>\s?/.test(line)) {
      const q = el("blockquote");
      const para = [];
      while (i < lines.length && /^>\s?/.test(lines[i])) para.push(lines[i++].replace(/^>\s?/, ""));
      inline(q, para.join("\n"));
      root.append(q);
      continue;
    }
    const para = [];
    while (i < lines.length && !/^\s*$/.test(lines[i]) && !/^\s*(```|~~~)/.test(lines[i]) &&
           !/^#{1,6}\s/.test(lines[i]) && !/^\s*([-*+]|\d+[.)])\s+/.test(lines[i])) {
      para.push(lines[i++]);
    }
    const p = el("p");
    inline(p, para.join("\n"));
    root.append(p);
  }
  return root;
}

function el(tag) { return document.createElement(tag); }

// The inline rules, tried at each position in this order. Every repeat is
// bounded and no span crosses a line: the text is hostile, and an
// unbounded lazy span with no closer ("[[[[…", "````…") makes a regular
// expression take time quadratic (or worse) in the text's length.
const INLINE = /(`{1,3})([^`\n]{1,2000}?)\1(?!`)|\*\*([^\n]{1,1000}?)\*\*|__([^\n]{1,1000}?)__|\*([^*\s][^*\n]{0,1000}?)\*|_([^_\s][^_\n]{0,1000}?)_|\[([^\]\n]{1,500})\]\(([^)\s]{1,2000})\)/;

function inline(parent, text) {
  let rest = text;
  while (rest.length > 0) {
    const m = rest.match(INLINE);
    if (!m) { appendText(parent, rest); return; }
    if (m.index > 0) appendText(parent, rest.slice(0, m.index));
    if (m[1]) {
      const c = el("code");
      c.textContent = m[2];
      parent.append(c);
    } else if (m[3] !== undefined || m[4] !== undefined) {
      const b = el("strong");
      inline(b, m[3] ?? m[4]);
      parent.append(b);
    } else if (m[5] !== undefined || m[6] !== undefined) {
      const e = el("em");
      inline(e, m[5] ?? m[6]);
      parent.append(e);
    } else if (m[7] !== undefined) {
      parent.append(link(m[7], m[8]));
    }
    rest = rest.slice(m.index + m[0].length);
  }
}

function appendText(parent, s) {
  const parts = s.split("\n");
  parts.forEach((part, k) => {
    if (k > 0) parent.append(el("br"));
    parent.append(document.createTextNode(part));
  });
}

// link makes an <a> only for a safe scheme; anything else stays text.
function link(label, href) {
  let url;
  try { url = new URL(href); } catch { url = null; }
  if (!url || !["http:", "https:", "mailto:"].includes(url.protocol)) {
    return document.createTextNode(`[${label}](${href})`);
  }
  const a = el("a");
  a.href = url.href;
  a.rel = "noopener noreferrer nofollow";
  a.target = "_blank";
  a.textContent = label;
  return a;
}
