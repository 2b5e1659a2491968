CREATE OR REPLACE PROCEDURE public.db_drain_in(batch int, keyset bool) LANGUAGE plpgsql AS $$
DECLARE ids bigint[]; n bigint := 0; t timestamptz := clock_timestamp(); t0 timestamptz := clock_timestamp();
  l uuid := gen_random_uuid(); floor bigint := 0;
BEGIN
  LOOP
    IF keyset THEN
      WITH m AS (UPDATE exp.ob SET leader_id = l WHERE id IN (
         SELECT id FROM exp.ob WHERE id >= floor AND (leader_id IS NULL OR leader_id <> l) ORDER BY id LIMIT batch)
         RETURNING id) SELECT array_agg(id) INTO ids FROM m;
    ELSE
      WITH m AS (UPDATE exp.ob SET leader_id = l WHERE id IN (
         SELECT id FROM exp.ob WHERE (leader_id IS NULL OR leader_id <> l) ORDER BY id LIMIT batch)
         RETURNING id) SELECT array_agg(id) INTO ids FROM m;
    END IF;
    COMMIT;
    EXIT WHEN ids IS NULL;
    SELECT max(x) + 1 INTO floor FROM unnest(ids) x;
    DELETE FROM exp.ob WHERE id = ANY(ids) AND leader_id = l;
    COMMIT;
    n := n + array_length(ids, 1);
    IF n % 100000 = 0 THEN
      RAISE NOTICE '% rows: last 100k % s (% rows/s)', n, round(extract(epoch from clock_timestamp() - t)::numeric, 2),
        round(100000 / extract(epoch from clock_timestamp() - t));
      t := clock_timestamp();
    END IF;
  END LOOP;
  RAISE NOTICE 'total % rows in % s', n, round(extract(epoch from clock_timestamp() - t0)::numeric, 1);
END $$;
