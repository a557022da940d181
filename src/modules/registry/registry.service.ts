/**
 * The model registry: catalog records, artifact resolution (the exact sdk, else the newest older
 * minor of its major), metadata edits and download records. Models and artifacts are few and read on every download, so the whole catalog
 * is held in memory; `cpd models publish` (another process) and metadata edits send NOTIFY
 * cpd_registry and every server reloads.
 */
import { asc, eq } from 'drizzle-orm';
import type { AppContext } from '../../app-context';
import { DRAIN_DEADLINE_MS } from '../../platform/context';
import { createBatchWriter, followChanges, serialReload } from '../../platform/db';
import { AppError } from '../../platform/errors';
import type { Caller } from '../../platform/http/auth';
import { newId } from '../../platform/ids';
import type { ObjectStore } from '../../platform/storage';
import { type ModelMetadata, type ModelRecord, QUANTS, type Quant, SDK_PATTERN, SLUG_PATTERN } from './registry.schemas';
import { artifactFiles, artifacts, models } from './registry.tables';

export const REGISTRY_CHANNEL = 'cpd_registry';

export interface ArtifactFile {
  /** Path inside the bundle (forward slashes); the file name for a single-file artifact. */
  path: string;
  size: number;
  crc32: number;
  sha256: string;
  objectKey: string;
}

export interface Artifact {
  id: string;
  slug: string;
  quant: Quant;
  sdk: string;
  kind: 'file' | 'directory';
  /** Sum of the file sizes (not the ZIP size). */
  sizeBytes: number;
  /** SHA-256 of the file (single file) or of the manifest (directory); the download ETag. */
  contentHash: string;
  createdAt: Date;
  files: ArtifactFile[];
}

interface ModelEntry {
  slug: string;
  name: string;
  family: string;
  description: string;
  updatedAt: Date;
  artifacts: Artifact[];
}

export function parseSdk(sdk: string): { major: number; minor: number } | null {
  const m = SDK_PATTERN.exec(sdk);
  return m ? { major: Number(m[1]), minor: Number(m[2]) } : null;
}

const compareSdk = (a: string, b: string) => {
  const x = parseSdk(a)!;
  const y = parseSdk(b)!;
  return x.major - y.major || x.minor - y.minor;
};

export function assertSlug(slug: string): string {
  if (slug.length > 200 || !SLUG_PATTERN.test(slug)) throw new AppError('invalid', `invalid slug "${slug}": use [a-z0-9][a-z0-9._-]*`);
  return slug;
}

/** A download row waiting for the next batch insert, as a JSON array (half the bytes of an object). */
export type PendingDownload = [id: string, userId: string, keyId: string | null, artifactId: string, slug: string, quant: string, sdk: string, createdAtMs: number];

/**
 * The insert of a batch of download records ($1: PendingDownload[] as JSON), run as a prepared
 * statement (one round trip, planned once per connection); `replay` adds ON CONFLICT DO NOTHING,
 * whose speculative insertion costs PostgreSQL about a third more per row
 * (bench/download-insert.ts: plain ÷ ON CONFLICT 0.76 in the median round), so a batch is first written without it.
 * One JSON parameter: drizzle's per-row SQL building was a quarter of the CPU of a 302 download
 * under load. Rows are arrays, not objects: writing the parameter to the socket is most of what a
 * batch costs here. jsonb, not json: each `->>` of a json element parses its text again (eight
 * per row), which was half of PostgreSQL's time for a batch.
 */
export function insertDownloadsSql(replay: boolean): string {
  return `insert into downloads (id, user_id, key_id, artifact_id, slug, quant, sdk, created_at)
    select r->>0, r->>1, r->>2, r->>3, r->>4, r->>5, r->>6, to_timestamp((r->>7)::float8 / 1000)
    from jsonb_array_elements($1::jsonb) r${replay ? ' on conflict (id) do nothing' : ''}`;
}

function toRecord(m: ModelEntry): ModelRecord {
  const newest = m.artifacts.map((a) => a.sdk).sort(compareSdk).at(-1)!;
  const quants = QUANTS.filter((q) => m.artifacts.some((a) => a.quant === q));
  const sizeBytes = Math.max(...m.artifacts.filter((a) => a.sdk === newest).map((a) => a.sizeBytes));
  return { slug: m.slug, name: m.name, family: m.family, sdk: newest, quants, size_bytes: sizeBytes, description: m.description };
}

/**
 * How long download records wait to share an insert: batches of up to 500 rows cost PostgreSQL
 * 9-13 µs per row against 17-22 µs when each insert took what arrived during the one before,
 * which lifted the 302's req/s by about a quarter on two cores shared with the database
 * (bench/catalog.ts). A crash loses at most this much of the records, never money.
 */
const DOWNLOADS_LINGER_MS = 200;

export function createRegistryService(ctx: AppContext, deps: { store: ObjectStore }) {
  const { db } = ctx.database;
  let entries = new Map<string, ModelEntry>();
  let byId = new Map<string, Artifact>();
  let records: ModelRecord[] = [];
  let recordsJson = '[]';
  // Download records go through the group-commit writer: a 302 does not wait for its row, and the
  // rows of the downloads answered within DOWNLOADS_LINGER_MS share one insert. Ids are made here,
  // so a batch replayed after a lost acknowledgement inserts nothing twice; a row that cannot be
  // written is logged and the others are written.
  const downloads = createBatchWriter<PendingDownload>({
    name: 'download records',
    log: ctx.log,
    maxBatch: 500,
    concurrency: 1,
    lingerMs: DOWNLOADS_LINGER_MS,
    async write(rows, replay) {
      await ctx.database.prepared(insertDownloadsSql(replay), [JSON.stringify(rows)]);
    },
    setAside: async () => {},
  });
  /** Resolves once every download recorded so far is stored (or logged as not storable). */
  const flushDownloads = () => downloads.flush();
  ctx.onShutdown(() => downloads.close(DRAIN_DEADLINE_MS));

  async function readCatalog() {
    // One after the other on purpose: at start-up the pool holds one open connection, and parallel
    // queries would each open another (~7 ms apiece); these take well under a millisecond each.
    const modelRows = await db.select().from(models).orderBy(asc(models.slug));
    const artifactRows = await db.select().from(artifacts);
    const fileRows = await db.select().from(artifactFiles).orderBy(asc(artifactFiles.artifactId), asc(artifactFiles.position));
    const files = new Map<string, ArtifactFile[]>();
    for (const f of fileRows) {
      const list = files.get(f.artifactId) ?? [];
      list.push({ path: f.path, size: f.size, crc32: f.crc32, sha256: f.sha256, objectKey: f.objectKey });
      files.set(f.artifactId, list);
    }
    const nextEntries = new Map<string, ModelEntry>();
    for (const m of modelRows) nextEntries.set(m.slug, { ...m, artifacts: [] });
    const nextById = new Map<string, Artifact>();
    for (const a of artifactRows) {
      const artifact: Artifact = {
        id: a.id,
        slug: a.slug,
        quant: a.quant as Quant,
        sdk: a.sdk,
        kind: a.kind as Artifact['kind'],
        sizeBytes: a.sizeBytes,
        contentHash: a.contentHash,
        createdAt: a.createdAt,
        files: files.get(a.id) ?? [],
      };
      nextById.set(a.id, artifact);
      nextEntries.get(a.slug)?.artifacts.push(artifact);
    }
    entries = nextEntries;
    byId = nextById;
    // A model without artifacts has no sdk or size yet: it is not listed.
    records = [...entries.values()].filter((m) => m.artifacts.length > 0).map(toRecord);
    recordsJson = JSON.stringify(records);
  }

  /** The catalog read again; the answer includes everything committed before the call. */
  const reload = serialReload(readCatalog);

  function findArtifact(slug: string, quant: string, sdk: string): Artifact | null {
    const wanted = parseSdk(sdk)!;
    let best: Artifact | null = null;
    for (const a of entries.get(slug)?.artifacts ?? []) {
      if (a.quant !== quant) continue;
      const v = parseSdk(a.sdk)!;
      if (v.major !== wanted.major || v.minor > wanted.minor) continue;
      if (!best || v.minor > parseSdk(best.sdk)!.minor) best = a;
    }
    return best;
  }

  return {
    /** Loads the catalog and follows changes from other processes; app.ts awaits it once. */
    load: () => followChanges(ctx, REGISTRY_CHANNEL, reload, 'registry'),

    reload,

    listModels(): ModelRecord[] {
      return records;
    },

    /** GET /api/models body, serialized once per catalog change. */
    listModelsJson(): string {
      return recordsJson;
    },

    getModel(slug: string): ModelRecord {
      const record = records.find((r) => r.slug === slug);
      if (!record) throw new AppError('not_found', 'model not found');
      return record;
    },

    /** A model's artifacts, newest sdk first (the model page). */
    artifactsOf(slug: string): Artifact[] {
      return [...(entries.get(slug)?.artifacts ?? [])].sort((a, b) => compareSdk(b.sdk, a.sdk) || QUANTS.indexOf(a.quant) - QUANTS.indexOf(b.quant));
    },

    /** Newest change of a model (or of any model): sitemap lastmod. */
    lastModified(slug?: string): Date | null {
      const list = slug ? [entries.get(slug)].filter((m) => m !== undefined) : [...entries.values()];
      const times = list.flatMap((m) => [m.updatedAt.getTime(), ...m.artifacts.map((a) => a.createdAt.getTime())]);
      return times.length ? new Date(Math.max(...times)) : null;
    },

    /**
     * The artifact a download of (slug, quant, sdk) gets: the exact sdk, else the highest minor of
     * the same major that is not newer. Throws invalid (400) or not_found (404).
     */
    async resolveArtifact(slug: string, quant: string, sdk: string): Promise<Artifact> {
      if (!(QUANTS as readonly string[]).includes(quant)) throw new AppError('invalid', 'quant must be one of int4, int8, int326');
      if (!parseSdk(sdk)) throw new AppError('invalid', 'sdk must look like v1.0');
      // A miss may be a publish whose NOTIFY has not arrived yet: read once more before a 404.
      const found = findArtifact(slug, quant, sdk) ?? (await reload().then(() => findArtifact(slug, quant, sdk)));
      if (!found) throw new AppError('not_found', entries.has(slug) ? 'no artifact for this quant and sdk' : 'model not found');
      return found;
    },

    async requireArtifactById(id: string): Promise<Artifact> {
      const found = byId.get(id) ?? (await reload().then(() => byId.get(id)));
      if (!found) throw new AppError('not_found', 'artifact not found');
      return found;
    },

    /** The bytes of one file of an artifact, streamed from storage. */
    openFile(artifact: Artifact, path: string): ReadableStream<Uint8Array> {
      const file = artifact.files.find((f) => f.path === path);
      if (!file) throw new AppError('not_found', `no file "${path}" in ${artifact.slug}`);
      return deps.store.read(file.objectKey);
    },

    async updateModel(slug: string, patch: ModelMetadata): Promise<ModelRecord> {
      const updated = await db.transaction(async (tx) => {
        const rows = await tx
          .update(models)
          .set({ ...patch, updatedAt: ctx.clock.now() })
          .where(eq(models.slug, slug))
          .returning({ slug: models.slug });
        if (rows.length) await ctx.database.notify(REGISTRY_CHANNEL, slug, tx);
        return rows.length > 0;
      });
      if (!updated) throw new AppError('not_found', 'model not found');
      await reload();
      const entry = entries.get(slug)!;
      return entry.artifacts.length ? toRecord(entry) : { slug, name: entry.name, family: entry.family, sdk: '', quants: [], size_bytes: 0, description: entry.description };
    },

    /**
     * Records a download without waiting for it: one awaited INSERT per download costs a commit and
     * capped the authenticated 302 rate at ~1k req/s. Shutdown drains; a crash loses the records of
     * the batch being written.
     */
    recordDownload(caller: Caller, artifact: Artifact): void {
      // Time-ordered: each batch lands at the right edge of the primary key's index, not at random
      // pages all over it (PostgreSQL's time per batch: 15-25 % less).
      const id = newId('dl');
      void downloads.add([id, caller.userId, caller.keyId, artifact.id, artifact.slug, artifact.quant, artifact.sdk, ctx.clock.now().getTime()]);
    },

    flushDownloads,
  };
}

export type RegistryService = ReturnType<typeof createRegistryService>;
