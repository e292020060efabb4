// Lets the MCP conformance suite (0.1.16) start on Node.js 20: its bundle imports
// `globSync` from `fs`, which Node.js added in 22. The suite only calls it for its tier
// report (`**/checks.json`), never in `server` runs; here it says so if it ever is.
// Use: node --import ./conformance-shim.mjs node_modules/@modelcontextprotocol/conformance/dist/index.js …
import fs from 'node:fs';
import { register } from 'node:module';

if (typeof fs.globSync !== 'function') {
  const shim =
    'export * from "node:fs"; export { default } from "node:fs";' +
    'export function globSync() { throw new Error("fs.globSync needs Node.js 22 (conformance-shim.mjs)"); }';
  const hooks =
    `const shim = ${JSON.stringify('data:text/javascript,' + encodeURIComponent(shim))};` +
    'export async function resolve(specifier, context, next) {' +
    '  if (specifier === "fs" && context.parentURL && context.parentURL.includes("/@modelcontextprotocol/conformance/")) {' +
    '    return { url: shim, shortCircuit: true };' +
    '  }' +
    '  return next(specifier, context);' +
    '}';
  register('data:text/javascript,' + encodeURIComponent(hooks));
}
