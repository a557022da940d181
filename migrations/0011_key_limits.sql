CREATE TABLE "router_key_holds" (
	"id" text PRIMARY KEY NOT NULL,
	"key_id" text NOT NULL,
	"micros" bigint NOT NULL,
	"expires_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "models" text[];--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "spend_limit_micros" bigint;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "spend_period" text;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "expires_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "rpm" integer;--> statement-breakpoint
CREATE INDEX "router_key_holds_key_idx" ON "router_key_holds" USING btree ("key_id");