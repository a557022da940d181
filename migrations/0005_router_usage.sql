CREATE TABLE "router_usage" (
	"id" text PRIMARY KEY NOT NULL,
	"created_at" timestamp with time zone NOT NULL,
	"user_id" text,
	"key_id" text,
	"entrypoint" text NOT NULL,
	"model" text NOT NULL,
	"backend" text,
	"prompt_tokens" integer NOT NULL,
	"completion_tokens" integer NOT NULL,
	"cost_micros" bigint NOT NULL,
	"currency" text NOT NULL,
	"cost_usd_micros" bigint NOT NULL,
	"tokens_counted" boolean NOT NULL,
	"latency_ms" integer NOT NULL,
	"status" integer NOT NULL,
	"streamed" boolean NOT NULL,
	"aborted" boolean NOT NULL,
	"request_id" text
);
--> statement-breakpoint
CREATE TABLE "router_usage_hourly" (
	"hour" timestamp with time zone NOT NULL,
	"user_id" text NOT NULL,
	"model" text NOT NULL,
	"entrypoint" text NOT NULL,
	"requests" bigint NOT NULL,
	"tokens" bigint NOT NULL,
	"cost_micros" bigint NOT NULL,
	"cost_usd_micros" bigint NOT NULL,
	CONSTRAINT "router_usage_hourly_hour_user_id_model_entrypoint_pk" PRIMARY KEY("hour","user_id","model","entrypoint")
);
--> statement-breakpoint
CREATE INDEX "router_usage_user_created_idx" ON "router_usage" USING btree ("user_id","created_at");--> statement-breakpoint
CREATE INDEX "router_usage_created_idx" ON "router_usage" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "router_usage_hourly_user_hour_idx" ON "router_usage_hourly" USING btree ("user_id","hour");