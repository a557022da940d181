CREATE TABLE "gpu_prices" (
	"id" text PRIMARY KEY NOT NULL,
	"name" text NOT NULL,
	"hourly_price_micros" bigint NOT NULL,
	"position" integer NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "gpu_prices_name_unique" UNIQUE("name")
);
--> statement-breakpoint
CREATE TABLE "model_prices" (
	"id" text PRIMARY KEY NOT NULL,
	"slug" text NOT NULL,
	"unit" text NOT NULL,
	"price_micros" bigint NOT NULL,
	"position" integer NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "model_prices_slug_unique" UNIQUE("slug")
);
