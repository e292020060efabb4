// An MCP client on the official TypeScript SDK, for mcpwire's interop tests
// (adapters/cli/tests/interop_ts.rs runs it against `mcpwire serve`).
//
// Usage: node ts-client.mjs URL MODE
//   URL   the server's endpoint: http://HOST:PORT/mcp, or http://HOST:PORT/sse for legacy
//   MODE  streamable  StreamableHTTPClientTransport: initialize, tools/list, echo,
//                     slow_count with progress, DELETE (and the session is gone after it)
//         polling     the same against a server that closes every connection (SEP-1699):
//                     the slow_count call must resume with GET + Last-Event-ID (some
//                     resumes finding nothing new) and still see every progress step and
//                     the result
//         legacy      SSEClientTransport (HTTP+SSE, 2024-11-05): the endpoint event, then
//                     initialize, tools/list, echo, slow_count with progress over POSTs
//         drop        streamable, but the slow_count stream dies after its second
//                     progress event as a NAT timeout kills it: the client sees an error
//                     and the socket stays open, so the server still believes it alive
//                     (RESUME-14). The SDK resumes with GET + Last-Event-ID at once; the
//                     server must answer 200 (never 409) with the rest, every step once
//
// Asserts with node:assert; prints one JSON line of results on stdout and exits 0, or
// prints the failure on stderr and exits 1. Gives up after 20 s (exit 3).
// Messages are checked twice: as the transport delivered them, and as the Client
// dispatched them (onprogress).

import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { SSEClientTransport } from '@modelcontextprotocol/sdk/client/sse.js';

const [urlArg, mode] = process.argv.slice(2);
if (urlArg === undefined || !['streamable', 'polling', 'legacy', 'drop'].includes(mode)) {
    console.error('usage: node ts-client.mjs URL streamable|polling|legacy|drop');
    process.exit(2);
}
const url = new URL(urlArg);

setTimeout(() => {
    console.error('ts-client: timed out after 20 s');
    process.exit(3);
}, 20_000);

// Every HTTP exchange the transport makes, in order.
const exchanges = [];
const recordingFetch = async (input, init = {}) => {
    const headers = new Headers(init.headers);
    const entry = {
        method: init.method ?? 'GET',
        path: new URL(String(input instanceof Request ? input.url : input)).pathname,
        lastEventId: headers.get('last-event-id') ?? undefined,
        protocolVersion: headers.get('mcp-protocol-version') ?? undefined,
        rpc: typeof init.body === 'string' ? JSON.parse(init.body).method : undefined
    };
    exchanges.push(entry);
    const response = await fetch(input, init);
    entry.status = response.status;
    entry.contentType = response.headers.get('content-type') ?? undefined;
    const slowCount = typeof init.body === 'string' && init.body.includes('"slow_count"');
    if (mode === 'drop' && slowCount && response.body && !dropped) {
        dropped = true;
        return silentlyDying(response, entry);
    }
    return response;
};

// The slow_count stream, dying after its second progress event: the reader gets an
// error, and the socket under it is left open and unread (never cancelled), as a
// connection killed by a NAT timeout is left on the server's side.
let dropped = false;
function silentlyDying(response, entry) {
    const upstream = response.body.getReader();
    const decoder = new TextDecoder();
    let seen = '';
    const body = new ReadableStream({
        async pull(controller) {
            const { value, done } = await upstream.read();
            if (done) {
                controller.close();
                return;
            }
            controller.enqueue(value);
            seen += decoder.decode(value, { stream: true });
            if ((seen.match(/notifications\/progress/g) ?? []).length >= 2) {
                entry.dropped = true;
                controller.error(new TypeError('network connection lost (simulated)'));
            }
        }
    });
    return new Response(body, { status: response.status, headers: response.headers });
}

const errors = [];
let negotiated;
const transport =
    mode === 'legacy'
        ? new SSEClientTransport(url, { fetch: recordingFetch })
        : new StreamableHTTPClientTransport(url, { fetch: recordingFetch });
transport.onerror = error => errors.push(String(error?.message ?? error));
// Every JSON-RPC message the transport hands to the client, in order: what came off the
// wire, before the client's own dispatch (see the progress check below). The client
// chains a handler set before connect() ahead of its own.
const received = [];
transport.onmessage = message => received.push(message);
const setProtocolVersion = transport.setProtocolVersion.bind(transport);
transport.setProtocolVersion = version => {
    negotiated = version;
    setProtocolVersion(version);
};

const client = new Client({ name: 'ts-interop-client', version: '1.0.0' });
const clientErrors = [];
client.onerror = error => clientErrors.push(String(error?.message ?? error));

async function main() {
    await client.connect(transport);
    const server = client.getServerVersion();
    assert.equal(server?.name, 'mcpwire', 'serverInfo.name');
    assert.ok(negotiated, 'a protocol version was negotiated');

    const { tools } = await client.listTools();
    const names = tools.map(t => t.name).sort();
    assert.deepEqual(names, ['echo', 'slow_count']);
    const echoTool = tools.find(t => t.name === 'echo');
    assert.deepEqual(echoTool.inputSchema.required, ['text']);

    const text = 'héllo wörld ✓ "quoted"\nline two';
    const echo = await client.callTool({ name: 'echo', arguments: { text } });
    assert.deepEqual(echo.content, [{ type: 'text', text }]);
    assert.notEqual(echo.isError, true);

    const n = 4;
    // In polling mode the steps are three retry intervals apart, so the client is back
    // before the first one exists: resumes that have nothing to replay yet happen.
    // In drop mode the call outlives the drop by more than the `retry` (1 s) the client waits
    // before it resumes: the server still holds the dead connection then.
    const delay_ms = mode === 'polling' ? 150 : mode === 'drop' ? 1000 : 60;
    const progress = [];
    const tokens = [];
    const first = received.length;
    const counted = await client.callTool({ name: 'slow_count', arguments: { n, delay_ms } }, undefined, {
        onprogress: p => progress.push(p),
        onresumptiontoken: token => tokens.push(token),
        resetTimeoutOnProgress: true,
        timeout: 15_000
    });
    assert.deepEqual(counted.content, [{ type: 'text', text: String(n) }]);
    // On the wire: one progress notification per step, in order, for this call's token,
    // all before its result.
    const steps = Array.from({ length: n }, (_, i) => [i + 1, n]);
    const call = received.slice(first);
    const resultAt = call.findIndex(m => m.id !== undefined && m.result !== undefined);
    assert.ok(resultAt >= 0, 'the result came through the transport');
    const token = call[resultAt].id;
    const wire = call.slice(0, resultAt).filter(m => m.method === 'notifications/progress');
    assert.deepEqual(
        wire.map(m => [m.params.progressToken, m.params.progress, m.params.total]),
        steps.map(([p, t]) => [token, p, t]),
        'progress on the wire'
    );
    // Through the client's onprogress. The SDK dispatches a notification a microtask
    // later than a response, so when the last step and the result reach it in one chunk
    // of the legacy EventSource it drops that step and reports "unknown token"
    // (modelcontextprotocol/typescript-sdk#2580). The Streamable HTTP transport awaits
    // between events, so there every step must arrive.
    const delivered = progress.map(p => [p.progress, p.total]);
    const dropped = steps.slice(delivered.length);
    assert.deepEqual(delivered, steps.slice(0, delivered.length), 'onprogress in order');
    if (mode === 'legacy') {
        const unknown = clientErrors.filter(e => e.includes('progress notification for an unknown token'));
        assert.equal(unknown.length, dropped.length, 'only steps the SDK reports as raced are missing');
        assert.ok(dropped.length <= 1, 'at most the last step races the result');
    } else {
        assert.deepEqual(dropped, [], 'every step reached onprogress');
    }

    const result = {
        mode,
        protocolVersion: negotiated,
        server,
        tools: names,
        progress: progress.length,
        wireProgress: wire.length,
        eventIds: tokens.length
    };

    if (mode === 'legacy') {
        // The endpoint event sent every POST to the server's messages path, same origin.
        const posts = exchanges.filter(e => e.method === 'POST');
        assert.equal(posts.length, 5, 'initialize, initialized, tools/list, two calls');
        for (const post of posts) {
            assert.equal(post.path, '/messages');
            assert.equal(post.status, 202);
        }
        const gets = exchanges.filter(e => e.method === 'GET');
        assert.equal(gets.length, 1, 'one SSE stream');
        assert.equal(gets[0].status, 200);
        assert.match(gets[0].contentType ?? '', /^text\/event-stream/);
        assert.deepEqual(errors, [], 'no transport errors');
        assert.deepEqual(
            clientErrors.filter(e => !e.includes('progress notification for an unknown token')),
            [],
            'no client errors'
        );
        await client.close();
    } else {
        // The client opens its GET stream after the 202 to notifications/initialized.
        const standalone = exchanges.find(e => e.method === 'GET' && e.lastEventId === undefined);
        assert.ok(standalone, 'the client opened the GET stream');
        assert.equal(standalone.status, 200);
        assert.match(standalone.contentType ?? '', /^text\/event-stream/);
        // From notifications/initialized on, every request names the negotiated version.
        // (Before it, in polling mode, the initialize stream itself may be resumed.)
        const initialized = exchanges.findIndex(e => e.rpc === 'notifications/initialized');
        assert.ok(initialized > 0, 'notifications/initialized was POSTed');
        for (const e of exchanges.slice(initialized)) {
            assert.equal(e.protocolVersion, negotiated, `${e.method} names the protocol version`);
        }
        // The slow_count stream carried event ids (a priming event at least).
        assert.ok(tokens.length >= 1, 'the tools/call stream carried event ids');
        const resumes = exchanges.filter(e => e.method === 'GET' && tokens.includes(e.lastEventId));
        result.resumes = resumes.length;
        if (mode === 'polling' || mode === 'drop') {
            assert.ok(resumes.length >= 1, 'the client resumed the tools/call stream with Last-Event-ID');
            for (const r of resumes) {
                assert.equal(r.status, 200, 'a resume is answered with a stream');
            }
        } else {
            assert.equal(resumes.length, 0, 'nothing closed the stream early');
        }
        if (mode === 'drop') {
            assert.ok(exchanges.some(e => e.dropped), 'the stream was dropped');
            const other = errors.filter(e => !e.includes('simulated'));
            assert.deepEqual(other, [], 'no transport errors but the drop');
        } else {
            assert.deepEqual(errors, [], 'no transport errors');
        }
        assert.deepEqual(
            clientErrors.filter(e => !(mode === 'drop' && e.includes('simulated'))),
            [],
            'no client errors'
        );

        const sessionId = transport.sessionId;
        assert.ok(sessionId, 'a session id');
        await transport.terminateSession();
        const del = exchanges.findLast(e => e.method === 'DELETE');
        assert.equal(del?.status, 200, 'DELETE ends the session');
        assert.equal(transport.sessionId, undefined);
        await client.close();
        // The session is gone on the server too.
        const after = await fetch(url, {
            method: 'POST',
            headers: {
                'content-type': 'application/json',
                accept: 'application/json, text/event-stream',
                'mcp-session-id': sessionId,
                'mcp-protocol-version': negotiated
            },
            body: JSON.stringify({ jsonrpc: '2.0', id: 99, method: 'ping' })
        });
        await after.body?.cancel();
        assert.equal(after.status, 404, 'a request in the deleted session gets 404');
        result.sessionId = sessionId;
    }
    result.exchanges = exchanges.length;
    console.log(JSON.stringify(result));
}

main().then(
    () => process.exit(0),
    error => {
        console.error(`ts-client (${mode}): ${error?.stack ?? error}`);
        console.error(`ts-client: transport errors: ${JSON.stringify(errors)}`);
        console.error(`ts-client: client errors: ${JSON.stringify(clientErrors)}`);
        console.error(`ts-client: exchanges: ${JSON.stringify(exchanges)}`);
        process.exit(1);
    }
);
