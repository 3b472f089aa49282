-- The crowd's dimensions the cells and folds were last made for, a row each in the
-- table's order (crowd/src/summary/dimension.rs). A collector whose table differs adds
-- the columns it lacks to cells and folds, remakes the cells when it added one, and
-- lets the folds go to be made again (server/src/db/dimensions.rs, ensure). Empty
-- here: the first collector of this version refolds every day, since the bits of
-- days.varies and folds.merged now follow the table's order.
CREATE TABLE dimensions (
    position    INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    kind        TEXT NOT NULL,
    within_run  INTEGER NOT NULL
);
