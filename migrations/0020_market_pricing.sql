CREATE TABLE "redemption_codes" (
	"id" text PRIMARY KEY NOT NULL,
	"batch_id" text NOT NULL,
	"prefix" text NOT NULL,
	"code_hash" text NOT NULL,
	"amount_micros" bigint NOT NULL,
	"currency" text NOT NULL,
	"note" text,
	"expires_at" timestamp with time zone,
	"disabled_at" timestamp with time zone,
	"redeemed_by" text,
	"redeemed_at" timestamp with time zone,
	"created_at" timestamp with time zone NOT NULL,
	CONSTRAINT "redemption_codes_code_hash_unique" UNIQUE("code_hash")
);
--> statement-breakpoint
CREATE TABLE "redemption_failures" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "price_groups" (
	"name" text PRIMARY KEY NOT NULL,
	"multiplier_e4" integer NOT NULL,
	"description" text,
	"position" integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE "user_price_groups" (
	"user_id" text PRIMARY KEY NOT NULL,
	"group_name" text NOT NULL
);
--> statement-breakpoint
ALTER TABLE "router_usage" ADD COLUMN "cached_tokens" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "router_usage" ADD COLUMN "reasoning_tokens" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "model_prices" ADD COLUMN "input_price_micros" bigint;--> statement-breakpoint
ALTER TABLE "model_prices" ADD COLUMN "output_price_micros" bigint;--> statement-breakpoint
ALTER TABLE "model_prices" ADD COLUMN "cached_input_price_micros" bigint;--> statement-breakpoint
CREATE INDEX "redemption_codes_batch_idx" ON "redemption_codes" USING btree ("batch_id");--> statement-breakpoint
CREATE INDEX "redemption_failures_user_created_idx" ON "redemption_failures" USING btree ("user_id","created_at");