-- Record migration @P1 (@P2, its name) as applied, in the transaction that applied it.
INSERT INTO {{ledger}} (version, name) VALUES (@P1, @P2)
