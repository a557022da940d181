/** The drizzle handles a statement runs on, apart from the drivers that open them. */
import type { PgDatabase, PgQueryResultHKT, PgTransaction } from 'drizzle-orm/pg-core';

export type Db = PgDatabase<PgQueryResultHKT, Record<string, never>>;
export type Tx = PgTransaction<PgQueryResultHKT, Record<string, never>>;
/** Service functions that may join a caller's transaction take this. */
export type DbOrTx = Db | Tx;
