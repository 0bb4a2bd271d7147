/**
 * The client against a live `caveat serve` (tests/clients/test_typescript.py starts it,
 * with the world of tests/caveat/_doors.py: payment-api, evidence E-1 and an active
 * precedent, item 1, whose condition is `config.connection_pool.max eq 20`).
 * CAVEAT_URL is where it listens, CAVEAT_TOKEN an agent's token of tenant acme.
 * The tests run in order, in one process.
 */
import assert from "node:assert/strict";
import { test } from "node:test";

import {
  CONSISTENCY_HEADER,
  CaveatError,
  type CaveatClient,
  checkContext,
  createCaveatClient,
  pages,
} from "../src/index.js";

const baseUrl = process.env.CAVEAT_URL ?? "";
const token = process.env.CAVEAT_TOKEN ?? "";
assert.ok(baseUrl && token, "CAVEAT_URL and CAVEAT_TOKEN must be set");

const CASE = "INC-2";
const QUERY = "checkout slow, payment api connection pool exhausted";
const SEEN = { subject: "payment-api", attribute: "config.connection_pool.max", value: 20 };

interface Seen {
  method: string;
  path: string;
  sent: string | null; // the consistency token the request carried
  given: string | null; // the one its answer carried
}

/** A client that also records each request's path and consistency tokens (a middleware
 * registered after the client's own: it sees the request as sent, the answer as
 * received). */
function spied(): { caveat: CaveatClient; seen: Seen[] } {
  const caveat = createCaveatClient({ baseUrl, token, tenant: "acme" });
  const seen: Seen[] = [];
  caveat.raw.use({
    onResponse({ request, response }) {
      seen.push({
        method: request.method,
        path: new URL(request.url).pathname,
        sent: request.headers.get(CONSISTENCY_HEADER),
        given: response.headers.get(CONSISTENCY_HEADER),
      });
      return undefined;
    },
  });
  return { caveat, seen };
}

const refusal = (code: string, status: number) => (error: unknown) => {
  assert.ok(error instanceof CaveatError, `a CaveatError, not ${String(error)}`);
  assert.equal(error.code, code, error.message);
  assert.equal(error.status, status);
  return true;
};

test("the agent loop: open, observe, recall, record use, cite, check, propose", async () => {
  const { caveat, seen } = spied();
  // 1. open a case, 2. observe what is true now
  const opened = await caveat.POST("/v1/cases", {
    body: { id: CASE, subjects: ["payment-api"] },
  });
  assert.equal(opened.data.id, CASE);
  assert.equal(opened.data.status, "open");
  await caveat.POST("/v1/observations", { body: { observations: [SEEN] } });
  // 3. recall: a GET, typed parameters and answer
  const found = await caveat.GET("/v1/recall", {
    params: { query: { query: QUERY, subject: ["payment-api"], case: CASE } },
  });
  assert.equal(found.response.headers.get("Caveat-Served-By"), "primary");
  const context = new Map(found.data.items.map((r) => [r.item.id, r.item.text]));
  assert.deepEqual([...context.keys()], [1]);
  assert.match(context.get(1) ?? "", /pool exhausted at max 20/);
  // 4. record the use, 5. cite what influenced the answer
  const ask = { query: QUERY, subjects: ["payment-api"], case: CASE };
  const used = await caveat.POST("/v1/record-use", {
    body: { ...ask, used: [...context.keys()] },
  });
  assert.deepEqual(used.data.used, [1]);
  for (const item of used.data.used) {
    const cited = await caveat.POST("/v1/items/{item_id}/cite", {
      params: { path: { item_id: item } },
      body: { case: CASE, influence: "decisive" },
    });
    assert.equal(cited.data.influence, "decisive");
  }
  // 6. check the context before the model call: still usable
  const before = await checkContext(caveat, context, { case: CASE });
  assert.deepEqual(before.usable, [1]);
  assert.equal(context.size, 1);
  // a deploy changes the pool: the precedent is re-opened, the next check drops it
  await caveat.POST("/v1/events", {
    body: {
      specversion: "1.0",
      id: "deploy-ts-1",
      source: "ci",
      type: "deploy",
      subject: "payment-api",
      data: { changes: { "config.connection_pool.max": 100 } },
    },
  });
  const after = await checkContext(caveat, context, { case: CASE });
  assert.deepEqual(after.dropped, { "1": "needs_reverification" });
  assert.equal(context.size, 0);
  // 7. propose what the case taught, 8. close the case
  const proposed = await caveat.POST("/v1/proposals", {
    body: {
      case: CASE,
      proposals: [
        {
          kind: "episode",
          subject: "payment-api",
          attribute: "pool_exhausted_after_deploy",
          object: "E-1",
          required: ["config.connection_pool.max eq 100"],
          excluded: [],
          evidence: ["E-1"],
          epistemic: "observation",
          text: "After the deploy raised the pool max to 100, the pool was exhausted again.",
        },
      ],
    },
  });
  assert.deepEqual(
    proposed.data.map((o) => o.outcome),
    ["accepted"],
  );
  const closed = await caveat.POST("/v1/cases/{case_id}/close", {
    params: { path: { case_id: CASE } },
    body: { outcome: "confirmed" },
  });
  assert.equal(closed.data.status, "closed");
  assert.deepEqual(
    seen.map((s) => `${s.method} ${s.path}`),
    [
      "POST /v1/cases",
      "POST /v1/observations",
      "GET /v1/recall",
      "POST /v1/record-use",
      "POST /v1/items/1/cite",
      "POST /v1/context/check",
      "POST /v1/events",
      "POST /v1/context/check",
      "POST /v1/proposals",
      "POST /v1/cases/INC-2/close",
    ],
  );
});

test("the consistency token of each write is carried into the following requests", async () => {
  const { caveat, seen } = spied();
  assert.equal(caveat.consistencyToken(), undefined);
  await caveat.GET("/v1/recall", { params: { query: { query: QUERY } } });
  await caveat.POST("/v1/cases", { body: { id: "INC-3", subjects: ["payment-api"] } });
  await caveat.GET("/v1/recall", { params: { query: { query: QUERY, case: "INC-3" } } });
  await caveat.POST("/v1/observations", { body: { observations: [SEEN] } });
  await checkContext(caveat, new Map([[1, "precedent"]]), { case: "INC-3" });
  const [read0, write1, read1, write2, check2] = seen;
  assert.ok(read0 && write1 && read1 && write2 && check2);
  // nothing to carry before the first write; a read's answer gives no token
  assert.equal(read0.sent, null);
  assert.equal(read0.given, null);
  assert.match(write1.given ?? "", /^[0-9A-F]+\/[0-9A-F]+$/);
  assert.equal(read1.sent, write1.given);
  assert.equal(read1.given, null);
  // the next write's token replaces it (the WAL moved on)
  assert.equal(write2.sent, write1.given);
  assert.notEqual(write2.given, write1.given);
  assert.equal(check2.sent, write2.given);
  assert.equal(caveat.consistencyToken(), write2.given);
  // a token the caller gives itself wins over the carried one
  const spy = seen.length;
  await caveat.GET("/v1/recall", {
    params: { query: { query: QUERY }, header: { [CONSISTENCY_HEADER]: "0/0" } },
  });
  assert.equal(seen[spy]?.sent, "0/0");
  // a value that is not a WAL position is the server's typed refusal
  await assert.rejects(
    caveat.GET("/v1/recall", {
      params: { query: { query: QUERY }, header: { [CONSISTENCY_HEADER]: "soon" } },
    }),
    refusal("invalid_input", 422),
  );
});

test("a refusal is a CaveatError with its stable code", async () => {
  const { caveat } = spied();
  await assert.rejects(
    caveat.GET("/v1/items/{item_id}", { params: { path: { item_id: 999999 } } }),
    refusal("not_found", 404),
  );
  // an agent's token cannot perform an SME's action (the role table)
  await assert.rejects(
    caveat.POST("/v1/items/{item_id}/verify", { params: { path: { item_id: 1 } } }),
    refusal("forbidden", 403),
  );
  // bad input names the field
  const error = await caveat
    .POST("/v1/cases", { body: { id: "" } })
    .then(() => undefined, (e: unknown) => e);
  assert.ok(error instanceof CaveatError);
  assert.equal(error.code, "invalid_input");
  assert.equal(error.problem.type, "about:blank");
  assert.match(error.detail, /\bid\b/);
  assert.match(error.message, /^422 invalid_input: /);
  // a token the server does not know
  const [, tenant] = token.split(".");
  const stranger = createCaveatClient({ baseUrl, token: `cvt1.${tenant}.nobody.secret` });
  await assert.rejects(
    stranger.GET("/v1/recall", { params: { query: { query: QUERY } } }),
    refusal("unauthenticated", 401),
  );
  // the token names its tenant: another is refused before any request
  assert.equal(caveat.tenant, "acme");
  assert.throws(
    () => createCaveatClient({ baseUrl, token, tenant: "globex" }),
    /'acme', not 'globex'/,
  );
});

test("a request the schema does not allow does not compile", () => {
  const { caveat } = spied();
  // each marked call fails to type-check against src/schema.ts, and tsc fails on a
  // marker whose line compiles: the generated types are what the calls are checked against
  const never = () => {
    // @ts-expect-error: no such route
    void caveat.GET("/v1/no-such-route", {});
    // @ts-expect-error: a case needs its id
    void caveat.POST("/v1/cases", { body: { subjects: [] } });
    void caveat.POST("/v1/items/{item_id}/cite", {
      params: { path: { item_id: 1 } },
      // @ts-expect-error: an influence is one of four words
      body: { case: CASE, influence: "huge" },
    });
  };
  assert.equal(typeof never, "function");
});

test("pages walks a paginated list to its end", async () => {
  const { caveat, seen } = spied();
  for (const n of [1, 2, 3, 4, 5]) {
    await caveat.POST("/v1/cases", { body: { id: `PAGE-${n}` } });
  }
  const start = seen.length;
  const rows = [];
  for await (const row of pages(caveat, "/v1/audit", { action: "open_case", limit: 2 })) {
    rows.push(row);
  }
  const requests = seen.slice(start);
  assert.ok(requests.length >= 4, `${requests.length} pages of at most 2 rows`);
  assert.ok(requests.every((r) => r.path === "/v1/audit"));
  const whole = await caveat.GET("/v1/audit", {
    params: { query: { action: "open_case", limit: 500 } },
  });
  assert.equal(whole.data.next, null);
  assert.deepEqual(rows, whole.data.items);
  const seqs = rows.map((r) => r.seq);
  assert.ok(rows.length >= 5, JSON.stringify(seqs));
  assert.deepEqual(seqs, [...new Set(seqs)].sort((a, b) => a - b)); // chain order, once each
  assert.ok(rows.every((r) => r.action === "open_case" && r.actor === "agent-ir"));
});

test("offline: overlapping writes, an answer that is not problem details", async () => {
  // answers made here, in the order given, whatever was asked: the client's own rules
  const answers = [
    new Response("{}", { status: 201, headers: { [CONSISTENCY_HEADER]: "1/2A" } }),
    new Response("{}", { status: 201, headers: { [CONSISTENCY_HEADER]: "0/FFFFFFFF" } }),
    new Response("<html>Bad Gateway</html>", { status: 502, statusText: "Bad Gateway" }),
  ];
  const sent: Request[] = [];
  const offline = createCaveatClient({
    baseUrl: "http://127.0.0.1:9",
    token,
    fetch: async (request) => {
      sent.push(request);
      const answer = answers.shift();
      assert.ok(answer, "one answer a request");
      return answer;
    },
  });
  await offline.POST("/v1/observations", { body: { observations: [SEEN] } });
  await offline.POST("/v1/observations", { body: { observations: [SEEN] } });
  assert.equal(offline.consistencyToken(), "1/2A"); // 1/2A is past 0/FFFFFFFF
  const item = offline.GET("/v1/items/{item_id}", { params: { path: { item_id: 1 } } });
  await assert.rejects(item, (e: unknown) => {
    assert.ok(e instanceof CaveatError);
    assert.equal(e.code, "unexpected_response");
    assert.equal(e.status, 502);
    assert.match(e.detail, /Bad Gateway/);
    return true;
  });
  assert.deepEqual(
    sent.map((r) => [r.headers.get("Authorization"), r.headers.get(CONSISTENCY_HEADER)]),
    [
      [`Bearer ${token}`, null],
      [`Bearer ${token}`, "1/2A"],
      [`Bearer ${token}`, "1/2A"],
    ],
  );
});
