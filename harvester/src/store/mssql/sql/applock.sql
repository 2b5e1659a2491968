-- The migration lock: an application lock (@P1, the name) owned by the migration's transaction,
-- so it is released by the commit or the rollback, or when the session ends. Waits at most @P2
-- ms; returns sp_getapplock's result (0 or 1: held, -1: not within the wait, below: an error).
DECLARE @result INT;
EXEC @result = sp_getapplock @Resource = @P1, @LockMode = 'Exclusive',
     @LockOwner = 'Transaction', @LockTimeout = @P2;
SELECT @result AS result
