"""The tables (memlog/tables/): records, condensing, series, streams read twice."""
