import { bigint, index, integer, pgTable, primaryKey, text, timestamp, uniqueIndex } from 'drizzle-orm/pg-core';

export const models = pgTable('models', {
  slug: text('slug').primaryKey(),
  name: text('name').notNull(),
  family: text('family').notNull(),
  description: text('description').notNull(),
  createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  updatedAt: timestamp('updated_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
});

/** One (slug, quant, sdk): a single file or a directory. Republishing swaps the row in one transaction. */
export const artifacts = pgTable(
  'artifacts',
  {
    id: text('id').primaryKey(),
    slug: text('slug')
      .notNull()
      .references(() => models.slug, { onDelete: 'cascade' }),
    quant: text('quant').notNull(),
    sdk: text('sdk').notNull(),
    sdkMajor: integer('sdk_major').notNull(),
    sdkMinor: integer('sdk_minor').notNull(),
    kind: text('kind').notNull(), // 'file' | 'directory'
    sizeBytes: bigint('size_bytes', { mode: 'number' }).notNull(),
    /** SHA-256 of the manifest (paths, sizes, SHA-256s); the download ETag. */
    contentHash: text('content_hash').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [uniqueIndex('artifacts_triple_key').on(t.slug, t.quant, t.sdk)],
);

export const artifactFiles = pgTable(
  'artifact_files',
  {
    artifactId: text('artifact_id')
      .notNull()
      .references(() => artifacts.id, { onDelete: 'cascade' }),
    path: text('path').notNull(),
    position: integer('position').notNull(),
    size: bigint('size', { mode: 'number' }).notNull(),
    crc32: bigint('crc32', { mode: 'number' }).notNull(),
    sha256: text('sha256').notNull(),
    objectKey: text('object_key').notNull(),
  },
  (t) => [primaryKey({ columns: [t.artifactId, t.path] }), index('artifact_files_object_idx').on(t.objectKey)],
);

/** Every download: who, with which credential, what, when. No foreign key: artifacts are replaced. */
export const downloads = pgTable(
  'downloads',
  {
    id: text('id').primaryKey(),
    userId: text('user_id').notNull(),
    keyId: text('key_id'),
    artifactId: text('artifact_id').notNull(),
    slug: text('slug').notNull(),
    quant: text('quant').notNull(),
    sdk: text('sdk').notNull(),
    createdAt: timestamp('created_at', { withTimezone: true, mode: 'date' }).notNull().defaultNow(),
  },
  (t) => [index('downloads_user_idx').on(t.userId, t.createdAt)],
);
