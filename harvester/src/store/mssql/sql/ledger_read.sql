-- Whether migration @P1 is applied (a row: yes).
SELECT version FROM {{ledger}} WHERE version = @P1
