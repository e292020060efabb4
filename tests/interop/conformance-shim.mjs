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

// The suite's client scenarios start their test servers with `listen(0)`, on every
// interface; the tests here listen on loopback only. A listen with a port and no host
// gets 127.0.0.1. Some scenarios read `address()` right after `listen` returns, which
// works only when it binds at once: net looks a host up with `dns.lookup` first, which
// always answers later, so that lookup answers 127.0.0.1 at once instead.
import dns from 'node:dns';
import net from 'node:net';
const LOOPBACK = '127.0.0.1';
const lookup = dns.lookup;
dns.lookup = function (host, ...rest) {
  const callback = rest[rest.length - 1];
  if (host === LOOPBACK && typeof callback === 'function' && rest.length <= 2) {
    // Node.js 22 passes options ({all: true} among them) before the callback.
    const options = rest.length === 2 && typeof rest[0] === 'object' ? rest[0] : {};
    if (options && options.all) {
      callback(null, [{ address: LOOPBACK, family: 4 }]);
    } else {
      callback(null, LOOPBACK, 4);
    }
    return {};
  }
  return lookup.call(this, host, ...rest);
};
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if (typeof args[0] === 'number' && (args.length === 1 || typeof args[1] === 'function')) {
    args.splice(1, 0, LOOPBACK);
  }
  return listen.apply(this, args);
};
