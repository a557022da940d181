CREATE TABLE "router_backends" (
	"id" text PRIMARY KEY NOT NULL,
	"model" text NOT NULL,
	"url" text NOT NULL,
	"api_key_sealed" text,
	"weight" integer NOT NULL,
	"enabled" boolean NOT NULL,
	"position" integer NOT NULL,
	"updated_at" timestamp with time zone NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX "router_backends_model_url_key" ON "router_backends" USING btree ("model","url");