/** One schema migration: the name of its migrations/*.sql file and that file's text. */
export interface Migration {
  name: string;
  sql: string;
}
