export { openDatabase, type Database } from './client';
export type { Db, DbOrTx, Tx } from './handles';
export { migrate, type MigrateOptions } from './migrate';
export type { Migration } from './migration';
export { createBatchWriter, isTransient, type BatchWriter, type RowOutcome } from './batch-writer';
export { isDatabaseUnreachable } from './unreachable';
export { openJournal, type Journal } from './journal';
export { followChanges, serialReload } from './follow';
export { sqlState, UNIQUE_VIOLATION } from './sql-state';
