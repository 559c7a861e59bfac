// Loads .ts files as plain modules with each `enum Name { A, B }` compiled
// to a frozen object ({A: 0, B: 1}); the tests' plugins carry no other TS.
import fs from "node:fs";
import { fileURLToPath } from "node:url";

export async function load(url, context, nextLoad) {
  if (!url.startsWith("file:") || !url.endsWith(".ts")) return nextLoad(url, context);
  const src = fs.readFileSync(fileURLToPath(url), "utf8").replace(
    /enum\s+(\w+)\s*\{([^}]*)\}/g,
    (_, name, body) =>
      `const ${name} = Object.freeze({${body.split(",").map((s) => s.trim()).filter(Boolean).map((k, i) => `${k}: ${i}`).join(", ")}});`,
  );
  return { format: "module", source: src, shortCircuit: true };
}
