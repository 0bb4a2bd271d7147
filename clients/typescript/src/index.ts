/**
 * A thin client for caveat's HTTP API (docs/http.md): the types are generated from the
 * server's OpenAPI document (`src/schema.ts`, `make ts-types`), the calls are
 * openapi-fetch's, and one middleware adds what every caller of caveat needs:
 *
 * - the bearer token on every request;
 * - the `Caveat-Consistency-Token` of the last write, given back on every following
 *   request, so a read served by a replica shows the caller's own writes
 *   (docs/http.md, "Read replicas");
 * - a refusal (problem details, docs/http.md "Errors") thrown as a `CaveatError` with
 *   its stable `code`, so a call that returns has its answer in `data`.
 *
 * Two helpers follow the agent loop of docs/agents.md: `pages` walks a paginated
 * list, `checkContext` drops from a context what the store withdrew since recall.
 */
import createClient, {
  type Client,
  type FetchResponse,
  type MaybeOptionalInit,
  type Middleware,
} from "openapi-fetch";
import type {
  HttpMethod,
  MediaType,
  PathsWithMethod,
  RequiredKeysOf,
} from "openapi-typescript-helpers";

import type { components, operations, paths } from "./schema.js";

export type { components, operations, paths };
/** The named schemas of the OpenAPI document: `Schemas["RecallOut"]`, ... */
export type Schemas = components["schemas"];
/** Problem details with caveat's stable `code` (RFC 9457). */
export type Problem = Schemas["Problem"];

/** The header a write answers with and a read may be given back (docs/http.md). */
export const CONSISTENCY_HEADER = "Caveat-Consistency-Token";

/** A refusal: the problem details the server answered with, or, for an answer that
 * is not problem details (a proxy's error page), `code` `unexpected_response`. */
export class CaveatError extends Error {
  /** The stable reason code (`not_found`, `forbidden`, `invalid_input`, ...). */
  readonly code: string;
  /** The HTTP status. */
  readonly status: number;
  /** What was refused and where (one line). */
  readonly detail: string;
  /** The whole problem details, with any extra member (`key`, `line`, ...). */
  readonly problem: Problem & Record<string, unknown>;
  /** The method and URL of the refused request. */
  readonly request: string;

  constructor(problem: Problem & Record<string, unknown>, request = "") {
    super(`${problem.status} ${problem.code}: ${problem.detail}`);
    this.name = "CaveatError";
    this.code = problem.code;
    this.status = problem.status;
    this.detail = problem.detail;
    this.problem = problem;
    this.request = request;
  }

  /** The error for a refused `response` (its body is read). */
  static async from(response: Response, request?: Request): Promise<CaveatError> {
    const text = await response.text();
    const where = request ? `${request.method} ${request.url}` : "";
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = undefined;
    }
    if (isProblem(body)) return new CaveatError(body, where);
    const problem: Problem = {
      type: "about:blank",
      title: "unexpected response",
      status: response.status,
      detail: `${response.status} ${response.statusText}: ${text.slice(0, 200)}`.trim(),
      code: "unexpected_response",
    };
    return new CaveatError(problem, where);
  }
}

function isProblem(body: unknown): body is Problem & Record<string, unknown> {
  if (typeof body !== "object" || body === null) return false;
  const b = body as Record<string, unknown>;
  return typeof b.code === "string" && typeof b.status === "number" && typeof b.detail === "string";
}

// --- the client ----------------------------------------------------------------------

type InitParam<Init> =
  RequiredKeysOf<Init> extends never
    ? [(Init & { [key: string]: unknown })?]
    : [Init & { [key: string]: unknown }];

/** openapi-fetch's method with the refusal branch taken out: a refusal throws. */
export type AnsweringMethod<M extends HttpMethod> = <
  Path extends PathsWithMethod<paths, M>,
  Init extends MaybeOptionalInit<paths[Path], M>,
>(
  url: Path,
  ...init: InitParam<Init>
) => Promise<
  Extract<
    FetchResponse<Extract<paths[Path][M], Record<string | number, unknown>>, Init, MediaType>,
    { data: unknown }
  >
>;

export interface CaveatClientOptions {
  /** Where `caveat serve` listens, e.g. `http://127.0.0.1:8080`. */
  baseUrl: string;
  /** A token made by `caveat token create` (it names its tenant). */
  token: string;
  /** The tenant expected: a token that names another is refused here, before any call. */
  tenant?: string;
  /** A fetch of your own (defaults to the global fetch). */
  fetch?: (request: Request) => Promise<Response>;
}

export interface CaveatClient {
  GET: AnsweringMethod<"get">;
  POST: AnsweringMethod<"post">;
  PUT: AnsweringMethod<"put">;
  DELETE: AnsweringMethod<"delete">;
  /** The tenant the token names. */
  readonly tenant: string;
  /** The consistency token of the latest write answered so far, if any. */
  consistencyToken(): string | undefined;
  /** The openapi-fetch client underneath (`use()` a middleware of your own, ...). */
  readonly raw: Client<paths>;
}

const WRITES = new Set(["POST", "PUT", "PATCH", "DELETE"]);

/** A WAL position `X/Y` as a number, to keep the later of two tokens. */
function position(token: string): bigint | undefined {
  const m = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(token);
  return m ? (BigInt(`0x${m[1]}`) << 32n) + BigInt(`0x${m[2]}`) : undefined;
}

/** The tenant a token `cvt1.<tenant, URL-safe base64>.<id>.<secret>` names. */
export function tokenTenant(token: string): string {
  const parts = token.split(".");
  if (parts.length !== 4 || parts[0] !== "cvt1" || !parts[1]) {
    throw new TypeError("not a caveat token: expected cvt1.<tenant>.<id>.<secret>");
  }
  const base64 = parts[1].replace(/-/g, "+").replace(/_/g, "/");
  const bytes = Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  return new TextDecoder().decode(bytes);
}

/** A client for one token: every call authenticated, the consistency token carried,
 * a refusal thrown as `CaveatError`. */
export function createCaveatClient(options: CaveatClientOptions): CaveatClient {
  const tenant = tokenTenant(options.token);
  if (options.tenant !== undefined && options.tenant !== tenant) {
    throw new TypeError(`the token names tenant '${tenant}', not '${options.tenant}'`);
  }
  let latest: string | undefined;
  const raw = createClient<paths>({ baseUrl: options.baseUrl, fetch: options.fetch });
  const caveat: Middleware = {
    onRequest({ request }) {
      request.headers.set("Authorization", `Bearer ${options.token}`);
      if (latest !== undefined && !request.headers.has(CONSISTENCY_HEADER)) {
        request.headers.set(CONSISTENCY_HEADER, latest);
      }
      return request;
    },
    async onResponse({ request, response }) {
      if (!response.ok) throw await CaveatError.from(response, request);
      const given = response.headers.get(CONSISTENCY_HEADER);
      if (given !== null && WRITES.has(request.method)) {
        // answers of concurrent writes may arrive out of order: keep the later position
        const now = position(given);
        const before = latest === undefined ? undefined : position(latest);
        if (now === undefined || before === undefined || now >= before) latest = given;
      }
      return response;
    },
  };
  raw.use(caveat);
  return {
    GET: raw.GET as AnsweringMethod<"get">,
    POST: raw.POST as AnsweringMethod<"post">,
    PUT: raw.PUT as AnsweringMethod<"put">,
    DELETE: raw.DELETE as AnsweringMethod<"delete">,
    tenant,
    consistencyToken: () => latest,
    raw,
  };
}

// --- pagination ----------------------------------------------------------------------

type JsonOf<Op> = Op extends {
  responses: { 200: { content: { "application/json": infer Body } } };
}
  ? Body
  : never;

/** The GET routes that answer a page, `{items, next}` (docs/http.md, "Pagination"). */
export type PagedPath = {
  [P in PathsWithMethod<paths, "get">]: JsonOf<paths[P]["get"]> extends {
    items: unknown[];
    next: string | null;
  }
    ? P
    : never;
}[PathsWithMethod<paths, "get">];

type QueryOf<P extends PagedPath> = paths[P]["get"] extends {
  parameters: { query?: infer Q };
}
  ? Omit<NonNullable<Q>, "cursor">
  : never;

/** One row of a paged list. */
export type PageItem<P extends PagedPath> =
  JsonOf<paths[P]["get"]> extends { items: (infer Item)[] } ? Item : never;

/** Every row of a paginated list, page after page (`limit` rows a request), following
 * `next` until the last page. */
export async function* pages<P extends PagedPath>(
  client: CaveatClient,
  path: P,
  query?: QueryOf<P>,
): AsyncGenerator<PageItem<P>, void, undefined> {
  // the path is generic here: openapi-fetch's per-path typing is checked at the call
  const get = client.GET as unknown as (
    url: string,
    init: { params: { query: Record<string, unknown> } },
  ) => Promise<{ data: { items: PageItem<P>[]; next: string | null } }>;
  let cursor: string | null = null;
  do {
    const params = { query: { ...query, ...(cursor === null ? {} : { cursor }) } };
    const { data } = await get(path, { params });
    yield* data.items;
    cursor = data.next;
  } while (cursor !== null);
}

// --- the context check (docs/agents.md, step 6) --------------------------------------

export type ContextIn = Schemas["ContextIn"];
export type ContextOut = Schemas["ContextOut"];

/** Before a model call: ask the store which of `context`'s items are still usable
 * (`POST /v1/context/check`), delete the dropped ones from `context`, and return the
 * answer (`dropped` says why each went). */
export async function checkContext<T>(
  client: CaveatClient,
  context: Map<number, T>,
  request: Omit<ContextIn, "items"> = {},
): Promise<ContextOut> {
  const { data } = await client.POST("/v1/context/check", {
    body: { ...request, items: [...context.keys()] },
  });
  for (const id of Object.keys(data.dropped)) context.delete(Number(id));
  return data;
}
