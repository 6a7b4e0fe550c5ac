/**
 * The store's schema in PostgreSQL, as `@effect/sql` migrations (run by `Database.layer` when a
 * gateway or the CLI starts; each runs once, in order, recorded in `ctxo_migrations`). Every row
 * carries its tenant (`default` without API keys): one database serves every tenant, and no query
 * of a tenant's store reaches another's rows.
 *
 *   ctxo_sessions           the thin records (id, concept, createdAt, state, stateChangedAt,
 *                           metadata) in creation order (`position`)
 *   ctxo_files              a session's files by path: content (bytes, UTF-8), version (the first
 *                           16 hex digits of its SHA-256), size, modification time; the control
 *                           files (context-config.json, tasks.json, memory.json, map.json), full
 *                           tool results (tool-results/<id>.json) and runs (runs/<id>.json) too
 *   ctxo_global_files       the files at the top of the data root (profile.md, system-prompt.md, ...)
 *   ctxo_root_files         what only the store writes at the top of the root: memory.json (L3 and
 *                           L4 memory) and knowledge-index.json
 *   ctxo_distributions      task distributions, the newest 1,000, by id; an idempotency key is
 *                           unique per tenant
 *   ctxo_histories          a session's history: `seq` (from one sequence for all histories: it
 *                           changes with every recorded change, so a replica tells a history it
 *                           holds from a newer one), the document's other fields (`fields`, with
 *                           the place of `messages` among them), or `raw`: a history written whole
 *                           that is not a v1 document, kept as written
 *   ctxo_history_messages   its messages, one row each (`idx` from 0, `written_seq`: the change
 *                           that wrote it); a recorded step appends its messages; the input of a
 *                           turn with an idempotency key is unique per session
 *   ctxo_history_v1         a view: each history as its `ctxo.history/v1` document (`messages.json`)
 *
 * JSON is kept as `json` (its text as written, key order included), never `jsonb`: a tool call's
 * arguments come back byte for byte, so a compile reads the same request from either store.
 */
import * as SqlClient from "@effect/sql/SqlClient"
import { Effect } from "effect"

const initial = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE SEQUENCE ctxo_history_seq`
  yield* sql`
    CREATE TABLE ctxo_sessions (
      tenant text NOT NULL,
      id text NOT NULL,
      position bigint GENERATED ALWAYS AS IDENTITY,
      concept text NOT NULL,
      created_at text NOT NULL,
      state text NOT NULL CHECK (state IN ('active', 'paused', 'ended')),
      state_changed_at text NOT NULL,
      metadata json NOT NULL,
      PRIMARY KEY (tenant, id)
    )`
  yield* sql`
    CREATE TABLE ctxo_files (
      tenant text NOT NULL,
      session_id text NOT NULL,
      path text NOT NULL,
      content bytea NOT NULL,
      version text NOT NULL,
      size integer NOT NULL,
      modified_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (tenant, session_id, path),
      FOREIGN KEY (tenant, session_id) REFERENCES ctxo_sessions (tenant, id) ON DELETE CASCADE
    )`
  yield* sql`
    CREATE TABLE ctxo_global_files (
      tenant text NOT NULL,
      name text NOT NULL,
      content bytea NOT NULL,
      modified_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (tenant, name)
    )`
  yield* sql`
    CREATE TABLE ctxo_root_files (
      tenant text NOT NULL,
      name text NOT NULL CHECK (name IN ('memory.json', 'knowledge-index.json')),
      content text NOT NULL,
      modified_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (tenant, name)
    )`
  yield* sql`
    CREATE TABLE ctxo_distributions (
      tenant text NOT NULL,
      id text NOT NULL,
      position bigint GENERATED ALWAYS AS IDENTITY,
      idempotency_key text,
      body json NOT NULL,
      PRIMARY KEY (tenant, id),
      UNIQUE (tenant, idempotency_key)
    )`
  yield* sql`CREATE INDEX ctxo_distributions_order ON ctxo_distributions (tenant, position)`
  yield* sql`
    CREATE TABLE ctxo_histories (
      tenant text NOT NULL,
      session_id text NOT NULL,
      seq bigint NOT NULL,
      fields json NOT NULL,
      messages_at integer NOT NULL,
      message_count integer NOT NULL,
      raw text,
      modified_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (tenant, session_id),
      FOREIGN KEY (tenant, session_id) REFERENCES ctxo_sessions (tenant, id) ON DELETE CASCADE
    )`
  yield* sql`
    CREATE TABLE ctxo_history_messages (
      tenant text NOT NULL,
      session_id text NOT NULL,
      idx integer NOT NULL,
      message json NOT NULL,
      written_seq bigint NOT NULL,
      PRIMARY KEY (tenant, session_id, idx),
      FOREIGN KEY (tenant, session_id) REFERENCES ctxo_histories (tenant, session_id) ON DELETE CASCADE
    )`
  yield* sql`
    CREATE INDEX ctxo_history_messages_written
      ON ctxo_history_messages (tenant, session_id, written_seq)`
  // A turn's input is recorded once: its idempotency key is unique in the session's history.
  yield* sql`
    CREATE UNIQUE INDEX ctxo_history_input_keys
      ON ctxo_history_messages (tenant, session_id, ((message -> 'meta' ->> 'inputKey')))
      WHERE (message -> 'meta' ->> 'kind') = 'input' AND (message -> 'meta' ->> 'inputKey') IS NOT NULL`
  // The v1 document of each history, its fields in their written order with `messages` in its place.
  yield* sql`
    CREATE VIEW ctxo_history_v1 AS
    SELECT h.tenant, h.session_id, h.seq, h.modified_at,
      CASE WHEN h.raw IS NOT NULL THEN h.raw ELSE (
        SELECT '{' || string_agg(part, ',' ORDER BY ord) || '}'
        FROM (
          SELECT f.ord * 2 AS ord, to_json(f.key)::text || ':' || f.value::text AS part
          FROM json_each(h.fields) WITH ORDINALITY AS f(key, value, ord)
          UNION ALL
          SELECT h.messages_at * 2 + 1, '"messages":' || coalesce((
            SELECT json_agg(m.message ORDER BY m.idx)::text
            FROM ctxo_history_messages m
            WHERE m.tenant = h.tenant AND m.session_id = h.session_id
          ), '[]')
        ) AS parts
      ) END AS document
    FROM ctxo_histories h`
})

/** The migrations by `<id>_<name>`, oldest first. */
export const migrations: Record<string, Effect.Effect<void, unknown, SqlClient.SqlClient>> = {
  "1_initial": initial
}

/** Where the migrator records what it ran. */
export const MIGRATIONS_TABLE = "ctxo_migrations"
