// The official TypeScript SDK v2 client (@modelcontextprotocol/client, pinned in
// package.json) against `mcpwire serve`, driven by adapters/cli/tests/interop_ts_v2.rs.
//
//   node ts-client-v2.mjs auto URL    versionNegotiation 'auto': the server/discover probe
//                                     negotiates 2026-07-28; tools/list; tools/call of
//                                     slow_count with progress; a call aborted (its
//                                     stream closed) while it runs.
//   node ts-client-v2.mjs listen URL  'auto' against `serve --conformance`: a listen for
//                                     tools list changes hears the one test_trigger_tool_change
//                                     announces, then is closed.
//   node ts-client-v2.mjs legacy URL  the default negotiation ('legacy': initialize,
//                                     2025-11-25) on the same endpoint: tools/list and a call.
//
// Prints one line per fact checked, then `ok`; exits 1 with the reason on the first
// fact that does not hold.
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const [mode, url] = process.argv.slice(2);

function check(condition, what) {
    if (!condition) {
        console.error(`FAILED: ${what}`);
        process.exit(1);
    }
    console.log(`checked: ${what}`);
}

async function connect(options) {
    const client = new Client({ name: 'mcpwire-interop-v2', version: '1.0.0' }, options);
    await client.connect(new StreamableHTTPClientTransport(new URL(url)));
    return client;
}

async function auto() {
    const client = await connect({ versionNegotiation: { mode: 'auto' } });
    check(client.getProtocolEra() === 'modern', `era is modern (${client.getProtocolEra()})`);
    check(client.getNegotiatedProtocolVersion() === '2026-07-28',
        `negotiated ${client.getNegotiatedProtocolVersion()}`);
    const discover = client.getDiscoverResult();
    check(discover?.supportedVersions?.includes('2025-11-25'),
        'server/discover lists the session era too');
    const { tools } = await client.listTools();
    check(tools.some(t => t.name === 'slow_count'), 'tools/list names slow_count');
    const progress = [];
    const result = await client.callTool(
        { name: 'slow_count', arguments: { n: 3, delay_ms: 20 } },
        { onprogress: p => progress.push(p.progress) },
    );
    check(result.content?.[0]?.text === '3', `slow_count answers 3 (${JSON.stringify(result)})`);
    check(progress.join(',') === '1,2,3', `progress 1,2,3 on the response stream (${progress})`);
    const abort = new AbortController();
    const pending = client.callTool(
        { name: 'slow_count', arguments: { n: 100, delay_ms: 100 } },
        { signal: abort.signal, onprogress: () => abort.abort('enough') },
    );
    const outcome = await pending.then(() => 'answered', e => `rejected: ${e}`);
    check(outcome.startsWith('rejected'), `the aborted call is rejected (${outcome})`);
    // The client still works after the abort.
    const echo = await client.callTool({ name: 'echo', arguments: { text: 'after' } });
    check(echo.content?.[0]?.text === 'after', 'a call after the abort is answered');
    await client.close();
}

async function listen() {
    const client = await connect({ versionNegotiation: { mode: 'auto' } });
    check(client.getNegotiatedProtocolVersion() === '2026-07-28', 'negotiated 2026-07-28');
    let heard;
    const changed = new Promise(resolve => { heard = resolve; });
    client.setNotificationHandler('notifications/tools/list_changed', n => heard(n));
    const sub = await client.listen({ toolsListChanged: true });
    check(sub.honoredFilter?.toolsListChanged === true,
        `the acknowledgement honours toolsListChanged (${JSON.stringify(sub.honoredFilter)})`);
    const trigger = await client.callTool({ name: 'test_trigger_tool_change', arguments: {} });
    check(!trigger.isError, 'the trigger tool answers');
    const note = await Promise.race([
        changed,
        new Promise((_, reject) => setTimeout(() => reject(new Error('no list_changed in 5 s')), 5000)),
    ]);
    check(typeof note.params?._meta?.['io.modelcontextprotocol/subscriptionId'] === 'string',
        `the notification carries the subscription id (${JSON.stringify(note.params)})`);
    await sub.close();
    await client.close();
}

async function legacy() {
    const client = await connect({});
    check(client.getProtocolEra() === 'legacy', `era is legacy (${client.getProtocolEra()})`);
    check(client.getNegotiatedProtocolVersion() === '2025-11-25',
        `negotiated ${client.getNegotiatedProtocolVersion()}`);
    const { tools } = await client.listTools();
    check(tools.some(t => t.name === 'echo'), 'tools/list names echo');
    const echo = await client.callTool({ name: 'echo', arguments: { text: 'hi' } });
    check(echo.content?.[0]?.text === 'hi', 'echo answers in the session era');
    await client.close();
}

const modes = { auto, listen, legacy };
if (!modes[mode]) {
    console.error(`usage: ts-client-v2.mjs auto|listen|legacy URL`);
    process.exit(2);
}
try {
    await modes[mode]();
    console.log('ok');
    process.exit(0);
} catch (e) {
    console.error(`FAILED: ${e?.stack ?? e}`);
    process.exit(1);
}
