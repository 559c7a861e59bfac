// The fake tsx's ESM loader (what `node --import tsx` runs): it registers
// the load hook in hooks.mjs, as the real tsx does.
import { register } from "node:module";
register("./hooks.mjs", import.meta.url);
globalThis.__fakeTsx = true;
