CREATE TABLE "capture_settings" (
	"id" text PRIMARY KEY NOT NULL,
	"rules" jsonb NOT NULL,
	"retention_days" integer NOT NULL,
	"updated_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "captures" (
	"id" text PRIMARY KEY NOT NULL,
	"user_id" text NOT NULL,
	"key_id" text,
	"endpoint" text NOT NULL,
	"entrypoint" text NOT NULL,
	"model" text NOT NULL,
	"status" integer NOT NULL,
	"latency_ms" integer NOT NULL,
	"backend" text,
	"usage_id" text,
	"streamed" boolean NOT NULL,
	"prompt_tokens" integer NOT NULL,
	"completion_tokens" integer NOT NULL,
	"cost_micros" bigint NOT NULL,
	"request_truncated" boolean NOT NULL,
	"response_truncated" boolean NOT NULL,
	"replay_of" text,
	"object_key" text NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"expires_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
ALTER TABLE "api_keys" ADD COLUMN "capture" boolean DEFAULT false NOT NULL;--> statement-breakpoint
CREATE INDEX "captures_user_idx" ON "captures" USING btree ("user_id","created_at","id");--> statement-breakpoint
CREATE INDEX "captures_created_idx" ON "captures" USING btree ("created_at","id");--> statement-breakpoint
CREATE INDEX "captures_expires_idx" ON "captures" USING btree ("expires_at");