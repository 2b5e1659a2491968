-- The settings a MariaDB/MySQL result depends on (bench/src/mariadb.rs), as (name, value)
-- rows; a variable the server does not have is simply absent (MariaDB before 11.1 names the
-- isolation tx_isolation, MySQL 8 only transaction_isolation). SHOW, not information_schema:
-- MySQL 8 no longer has GLOBAL_VARIABLES there.
SHOW GLOBAL VARIABLES
WHERE Variable_name IN ('version', 'innodb_flush_log_at_trx_commit', 'sync_binlog', 'log_bin',
                        'transaction_isolation', 'tx_isolation', 'innodb_buffer_pool_size')
