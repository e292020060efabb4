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
// The calls each scenario's server expects: a tool and its arguments (none: the tools
// are listed), after any flags. `initialize` checks the handshake only: its server answers
// any other request with an empty result. `sse-retry`'s server answers the pending call
// on any GET, taking it for the resume of the POST stream it closed: a standalone GET
// stream that reaches it after the POST would get the result before the close, and the
// resume it checks would never happen. So no standalone stream there: the only GET is the
// resume. The 2026-07-28 scenarios (conformance 0.2) are run one call per `mcpwire call`:
// `http-custom-headers` names its calls in MCP_CONFORMANCE_CONTEXT; the request-state
// scenario's four tools are called in the order its reference client uses.
function callsOf(scenario) {
    switch (scenario) {
        case 'initialize': return [['probe', '{}']];
        case 'tools_call': return [['add_numbers', '{"a":2,"b":3}']];
        case 'sse-retry': return [['--no-get-stream', 'test_reconnection', '{}']];
        case 'request-metadata': return [[]];
        case 'http-standard-headers': return [['test_headers', '{}'], ['my-hyphenated-tool', '{}']];
        case 'http-custom-headers': {
            const context = JSON.parse(process.env.MCP_CONFORMANCE_CONTEXT ?? '{}');
            return (context.toolCalls ?? []).map(c => [c.name, JSON.stringify(c.arguments ?? {})]);
        }
        case 'http-invalid-tool-headers': return [['valid_tool', '{"region":"us-west1"}']];
        case 'sep-2322-client-request-state': return [
            ['test_mrtr_echo_state', '{}'],
            ['test_mrtr_unrelated', '{}'],
            ['test_mrtr_no_state', '{}'],
            ['test_mrtr_no_result_type', '{}'],
        ];
        case 'json-schema-ref-no-deref': return [[]];
        default: return undefined;
    }
}
const calls = callsOf(scenario);
if (calls === undefined) {
    console.error(`conformance-client: no call for scenario ${scenario}`);
    process.exit(2);
}
const flags = (process.env.MCPWIRE_CALL_FLAGS ?? '').split(' ').filter(f => f !== '');
for (const call of calls) {
    const named = call.length >= 2 ? call.slice(-2) : [];
    const before = call.slice(0, call.length - named.length);
    const run = spawnSync(bin, ['call', '--timeout-ms', '20000', ...flags, ...before, url, ...named], {
        stdio: 'inherit',
    });
    if (run.status !== 0) {
        process.exit(run.status ?? 1);
    }
}
process.exit(0);
