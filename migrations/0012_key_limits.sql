CREATE TABLE "router_key_holds" (
	"id" text PRIMARY KEY NOT NULL,
	"key_id" text NOT NULL,
	"micros" bigint NOT NULL,
	"expires_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "router_usage_key_daily" (
	"day" timestamp with time zone NOT NULL,
	"key_id" text NOT NULL,
	"cost_micros" bigint NOT NULL,
	CONSTRAINT "router_usage_key_daily_key_id_day_pk" PRIMARY KEY("key_id","day")
);
--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "models" text[];--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "spend_limit_micros" bigint;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "spend_period" text;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "expires_at" timestamp with time zone;--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "rpm" integer;--> statement-breakpoint
CREATE INDEX "router_key_holds_key_idx" ON "router_key_holds" USING btree ("key_id");--> statement-breakpoint
-- Keys' spend so far, so limits set after the upgrade count what keys already spent.
INSERT INTO "router_usage_key_daily" ("day", "key_id", "cost_micros")
SELECT date_trunc('day', "created_at", 'UTC'), "key_id", sum("cost_micros") FROM "router_usage" WHERE "key_id" IS NOT NULL GROUP BY 1, 2;
