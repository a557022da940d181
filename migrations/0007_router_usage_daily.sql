CREATE TABLE "router_usage_daily" (
	"day" timestamp with time zone NOT NULL,
	"user_id" text NOT NULL,
	"model" text NOT NULL,
	"entrypoint" text NOT NULL,
	"requests" bigint NOT NULL,
	"tokens" bigint NOT NULL,
	"cost_micros" bigint NOT NULL,
	"cost_usd_micros" bigint NOT NULL,
	CONSTRAINT "router_usage_daily_day_user_id_model_entrypoint_pk" PRIMARY KEY("day","user_id","model","entrypoint")
);
--> statement-breakpoint
CREATE INDEX "router_usage_daily_user_day_idx" ON "router_usage_daily" USING btree ("user_id","day");