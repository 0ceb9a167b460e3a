-- made by make_020.py from b5ec645 (0.2.0)
BEGIN TRANSACTION;
CREATE TABLE admin_sessions (
    id_sha256 TEXT PRIMARY KEY,
    csrf TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL
);
CREATE TABLE competitions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL UNIQUE,
    league_toml TEXT NOT NULL,
    created_at REAL NOT NULL
, phase TEXT NOT NULL DEFAULT 'setup', ladder_concurrency INTEGER, frozen_at REAL, deadlines TEXT);
INSERT INTO "competitions" VALUES(1,'class of 0.2.0','[competition]
name = "class of 0.2.0"
# v2
',1.79642046335584259033e+09,'open',2,NULL,'[1900000000.0,null]');
CREATE TABLE league_versions (   -- every league file a competition had (issue 25)
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    competition_id INTEGER NOT NULL REFERENCES competitions(id),
    version INTEGER NOT NULL,      -- 1, 2, ... per competition
    league_toml TEXT NOT NULL,
    created_at REAL NOT NULL,
    who TEXT NOT NULL,             -- 'admin (page)', 'admin (API)', 'at creation'
    UNIQUE (competition_id, version)
);
INSERT INTO "league_versions" VALUES(1,1,1,'[competition]
name = "class of 0.2.0"
',1.79642046335584259033e+09,'at creation');
INSERT INTO "league_versions" VALUES(2,1,2,'[competition]
name = "class of 0.2.0"
# v2
',1.79642046335641217234e+09,'admin (API)');
CREATE TABLE practice_games (   -- a team's unrated, private practice game (issue 26)
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    competition_id INTEGER NOT NULL REFERENCES competitions(id),
    team_id INTEGER NOT NULL REFERENCES teams(id),
    seats TEXT NOT NULL,           -- JSON: the bots as picked (referee.web.practice.Seat)
    status TEXT NOT NULL,          -- queued, playing, finished, failed
    error TEXT,
    out_dir TEXT NOT NULL,
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    results TEXT                   -- JSON: each game played (referee.web.practice.Result)
);
INSERT INTO "practice_games" VALUES(1,1,1,'[{"kind": "self", "name": "ada", "pick": "self", "submission": 1}]','finished',NULL,'/tmp/referee-0.2.0-fixture/service-data/competition-1/practice/game-1',1.0,NULL,NULL,'[{"index": 0, "names": ["ada"], "places": [1], "seat": 0}]');
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    competition_id INTEGER NOT NULL REFERENCES competitions(id),
    out_dir TEXT NOT NULL,
    league_json TEXT NOT NULL,     -- the exact league played (for --resume)
    total_games INTEGER NOT NULL,
    status TEXT NOT NULL,          -- running, finished, interrupted, failed
    error TEXT,
    pid INTEGER,
    started_at REAL NOT NULL,
    finished_at REAL
, secrets_from TEXT, kind TEXT NOT NULL DEFAULT 'run', league_version INTEGER);
INSERT INTO "runs" VALUES(1,1,'/tmp/referee-0.2.0-fixture/service-data/competition-1/run-1','{}',3,'finished',NULL,NULL,1.79642046335650682449e+09,1.79642046335677671433e+09,NULL,'run',2);
CREATE TABLE service_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO "service_meta" VALUES('admin_token_sha256','04debf31413886e75eeeb2e8aa5ae1d0aad54f7574e166412296a80e1238c6c0');
INSERT INTO "service_meta" VALUES('instance_id','ibacf8b7224');
CREATE TABLE sessions (
    id_sha256 TEXT PRIMARY KEY,    -- the cookie's value is never stored, only its hash
    team_id INTEGER NOT NULL REFERENCES teams(id),
    csrf TEXT NOT NULL,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL
);
INSERT INTO "sessions" VALUES('10aa67fc2f6aa0a07d46c876dbf550879626385a34d2820238e92cb81ed306c0',1,'APQFF74u4rSVe3Zrk2km1Lq7WUghXQkb2E5xEZfIGeg',1.79642046335695099827e+09,2.11178046335695099831e+09);
CREATE TABLE submissions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    team_id INTEGER NOT NULL REFERENCES teams(id),
    kind TEXT NOT NULL,            -- 'url' or 'image'
    url TEXT,
    image TEXT,
    secret TEXT,
    note TEXT NOT NULL DEFAULT '',
    created_at REAL NOT NULL
, status TEXT NOT NULL DEFAULT 'accepted', reason TEXT, report TEXT, log TEXT, image_id TEXT, address TEXT, upload TEXT, updated_at REAL, retry_at REAL);
INSERT INTO "submissions" VALUES(1,1,'url','http://127.0.0.1:9/',NULL,'s3','v1',1.79642046335599708554e+09,'accepted',NULL,'{"ok": true}',NULL,NULL,NULL,NULL,1.79642046335632824894e+09,NULL);
INSERT INTO "submissions" VALUES(2,2,'url','http://127.0.0.1:9/',NULL,NULL,'b1',1.79642046335636234285e+09,'queued',NULL,NULL,NULL,NULL,NULL,NULL,1.79642046335636234285e+09,NULL);
CREATE TABLE teams (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    competition_id INTEGER NOT NULL REFERENCES competitions(id),
    name TEXT NOT NULL,
    token_sha256 TEXT NOT NULL UNIQUE,
    created_at REAL NOT NULL, withdrawn_at REAL,
    UNIQUE (competition_id, name)
);
INSERT INTO "teams" VALUES(1,1,'ada','336087683325fcd948a2a3981556841e0cb37dac619dbf1250e881e113772da4',1.79642046335591697688e+09,NULL);
INSERT INTO "teams" VALUES(2,1,'bob','2236254117edfb8d38bd7383c43b20e9eeed5c2a9fd13c5865874a00a0361a41',1.79642046335591697688e+09,1.79642046335687255854e+09);
CREATE TABLE upload_slots (   -- a team's one upload in flight (issue 24)
    team_id INTEGER PRIMARY KEY REFERENCES teams(id),
    token TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE INDEX submissions_team ON submissions(team_id, created_at);
CREATE INDEX runs_competition ON runs(competition_id, id);
CREATE INDEX practice_team ON practice_games(team_id, id);
DELETE FROM "sqlite_sequence";
INSERT INTO "sqlite_sequence" VALUES('competitions',1);
INSERT INTO "sqlite_sequence" VALUES('league_versions',2);
INSERT INTO "sqlite_sequence" VALUES('teams',2);
INSERT INTO "sqlite_sequence" VALUES('submissions',2);
INSERT INTO "sqlite_sequence" VALUES('runs',1);
INSERT INTO "sqlite_sequence" VALUES('practice_games',1);
COMMIT;
PRAGMA user_version = 2;
