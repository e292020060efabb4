// The client under test for the conformance suite's client scenarios: the suite runs
// `node conformance-client.mjs URL` with MCP_CONFORMANCE_SCENARIO set, and this runs
// `mcpwire call` against URL with the tool that scenario's server offers.
//
//   MCPWIRE_BIN          the mcpwire binary (set by adapters/cli/tests/conformance.rs)
//   MCPWIRE_CALL_FLAGS   extra flags for `mcpwire call` (e.g. --blocking), space-separated
//
// Exits with mcpwire's status; its output passes through.

import { spawnSync } from 'node:child_process';

// The suite names its server `localhost`; it listens on 127.0.0.1 (conformance-shim.mjs),
// and the tests reach nothing else.
const url = process.argv[2]?.replace('//localhost:', '//127.0.0.1:');
const bin = process.env.MCPWIRE_BIN;
const scenario = process.env.MCP_CONFORMANCE_SCENARIO;
if (url === undefined || !bin || !scenario) {
    console.error('usage: MCPWIRE_BIN=… MCP_CONFORMANCE_SCENARIO=… node conformance-client.mjs URL');
    process.exit(2);
}
// The tool each scenario's server offers, and its arguments. `initialize` checks the
// handshake only: its server answers any other request with an empty result.
// `sse-retry`'s server answers the pending call on any GET, taking it for the resume of
// the POST stream it closed: a standalone GET stream that reaches it after the POST would
// get the result before the close, and the resume it checks would never happen. So no
// standalone stream there: the only GET is the resume.
const calls = {
    initialize: ['probe', '{}'],
    tools_call: ['add_numbers', '{"a":2,"b":3}'],
    'sse-retry': ['--no-get-stream', 'test_reconnection', '{}'],
};
const call = calls[scenario];
if (call === undefined) {
    console.error(`conformance-client: no call for scenario ${scenario}`);
    process.exit(2);
}
const flags = (process.env.MCPWIRE_CALL_FLAGS ?? '').split(' ').filter(f => f !== '');
const [tool, args] = call.slice(-2);
const run = spawnSync(bin, ['call', '--timeout-ms', '20000', ...flags, ...call.slice(0, -2), url, tool, args], {
    stdio: 'inherit',
});
process.exit(run.status ?? 1);
